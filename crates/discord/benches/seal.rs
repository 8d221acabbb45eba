//! What sealing costs per `/ask`: ingress-edge seals once per admitted interaction, and
//! egress-discord opens once per callback (and once per reconciliation pass).

use criterion::{Criterion, criterion_group, criterion_main};
use reach_discord::Snowflake;
use reach_discord::model::InteractionToken;
use reach_discord::seal::{self, SealBinding, SealSecretKey};

fn seal_and_open(c: &mut Criterion) {
    let key = SealSecretKey::generate().unwrap();
    let public = key.public_key();
    let binding = SealBinding {
        application_id: Snowflake(1_100_000_000_000_000_001),
        interaction_id: Snowflake(1_250_000_000_000_000_001),
    };
    // Discord's interaction tokens are a few hundred characters.
    let token = InteractionToken("a".repeat(200));
    let blob = seal::seal(&public, binding, &token).unwrap();
    c.bench_function("seal interaction token", |b| {
        b.iter(|| seal::seal(&public, binding, &token).unwrap())
    });
    c.bench_function("open interaction token", |b| {
        b.iter(|| seal::open(&key, binding, &blob).unwrap())
    });
}

criterion_group!(benches, seal_and_open);
criterion_main!(benches);
