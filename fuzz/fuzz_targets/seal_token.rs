//! The sealed interaction token (crates/discord `seal`): blobs from outside opened by a key
//! ring, and key-ring files.
//!
//! Promised: an arbitrary blob never opens (every failure is a `seal/...` code naming only
//! its cause); a blob sealed here opens to exactly its token for its own interaction and for
//! no other; any single changed byte of a sealed blob is refused; a ring file is 32 or 72
//! bytes and round-trips.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use reach_discord::Snowflake;
use reach_discord::model::InteractionToken;
use reach_discord::seal::{RING_LEN, SealBinding, SealError, SealKeyring, SealedToken, seal};

#[derive(Debug, Arbitrary)]
enum Input {
    /// A blob from outside, opened by a fixed ring.
    Open {
        app: u64,
        interaction: u64,
        now_ms: u64,
        blob: Vec<u8>,
    },
    /// A token sealed here, then one byte changed (or none), or opened for another binding.
    Tamper {
        token: String,
        app: u64,
        interaction: u64,
        at: Option<(u16, u8)>,
        other: bool,
    },
    /// A key-ring file.
    Ring(Vec<u8>),
}

fn ring() -> SealKeyring {
    let mut bytes = [7u8; RING_LEN];
    bytes[32..64].fill(9);
    bytes[64..].copy_from_slice(&1_000_000u64.to_be_bytes());
    SealKeyring::from_bytes(&bytes).expect("a fixed ring")
}

fn typed(e: &SealError) {
    let text = e.to_string();
    assert!(text.starts_with("seal/"), "untyped seal error {text}");
}

fuzz_target!(|input: Input| {
    match input {
        Input::Open {
            app,
            interaction,
            now_ms,
            blob,
        } => {
            let binding = SealBinding {
                application_id: Snowflake(app),
                interaction_id: Snowflake(interaction),
            };
            match ring().open(binding, &SealedToken::from_bytes(blob), now_ms) {
                Ok(_) => panic!("a blob nobody sealed opened"),
                Err(e) => typed(&e),
            }
        }
        Input::Tamper {
            token,
            app,
            interaction,
            at,
            other,
        } => {
            let ring = ring();
            let binding = SealBinding {
                application_id: Snowflake(app),
                interaction_id: Snowflake(interaction),
            };
            let sealed = seal(
                &ring.current_public(),
                binding,
                &InteractionToken(token.clone()),
            )
            .expect("sealing to a fixed key");
            let mut bytes = sealed.into_bytes();
            let mut changed = false;
            if let Some((i, x)) = at
                && x != 0
            {
                let i = usize::from(i) % bytes.len();
                bytes[i] ^= x;
                changed = true;
            }
            let open_for = if other {
                SealBinding {
                    application_id: Snowflake(app),
                    interaction_id: Snowflake(interaction.wrapping_add(1)),
                }
            } else {
                binding
            };
            match ring.open(open_for, &SealedToken::from_bytes(bytes), 0) {
                Ok(t) => {
                    assert!(
                        !changed && !other,
                        "a changed blob or another interaction opened"
                    );
                    assert_eq!(t.0, token);
                }
                Err(e) => {
                    typed(&e);
                    assert!(changed || other, "an untouched blob did not open: {e}");
                }
            }
        }
        Input::Ring(bytes) => match SealKeyring::from_bytes(&bytes) {
            Ok(ring) => {
                assert!(bytes.len() == 32 || bytes.len() == RING_LEN);
                let again = ring.to_bytes();
                let back = SealKeyring::from_bytes(&again).expect("a ring reads its own bytes");
                assert_eq!(back.to_bytes(), again);
                assert_eq!(back.current_public(), ring.current_public());
            }
            Err(e) => {
                typed(&e);
                assert_eq!(e, SealError::BadRingLength(bytes.len()));
            }
        },
    }
});
