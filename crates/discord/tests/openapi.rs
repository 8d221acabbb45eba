//! Discord's own OpenAPI spec (REST v10, `../shared/reference/discord-api-spec/openapi.json`)
//! as an oracle: every request body Reach's adapter sends in a mention and `/ask` round trip,
//! and every REST response the emulator answers with (ingress-edge's `GET /gateway/bot`
//! included), must validate against its operation's schema. A field Reach stops sending, or one
//! the emulator drops, fails here.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use common::*;
use reach_discord::Snowflake;
use reach_discord::model::InteractionToken;
use reach_discord::rest::{
    CallbackOutcome, CreateMessage, CreateOutcome, DeferredAck, FollowUp, InteractionReply, Nonce,
    OriginalEdit, Reconciliation,
};
use reach_discord_emulator::User;
use serde_json::{Value, json};

/// The spec, where the workspace keeps third-party specifications (beside the clone).
fn spec() -> Value {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let candidates = [
        root.join("../shared/reference/discord-api-spec/openapi.json"),
        PathBuf::from("/work/shared/reference/discord-api-spec/openapi.json"),
    ];
    let path = candidates
        .iter()
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("Discord's OpenAPI spec is in none of {candidates:?}"));
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The spec's path template for a concrete path: segments equal or a `{parameter}`, the most
/// literal match winning (`@original` before `{message_id}`).
fn template<'a>(spec: &'a Value, path: &str) -> Option<&'a str> {
    let path = path.strip_prefix("/api/v10").unwrap_or(path);
    let want: Vec<&str> = path.split('/').collect();
    spec["paths"]
        .as_object()?
        .keys()
        .filter_map(|t| {
            let segs: Vec<&str> = t.split('/').collect();
            if segs.len() != want.len() {
                return None;
            }
            let mut literal = 0;
            for (s, w) in segs.iter().zip(&want) {
                if s.starts_with('{') && s.ends_with('}') {
                    continue;
                }
                if s != w {
                    return None;
                }
                literal += 1;
            }
            Some((literal, t.as_str()))
        })
        .max()
        .map(|(_, t)| t)
}

/// Validates `instance` against `schema`, whose `$ref`s point into the spec's components.
fn violations(spec: &Value, schema: &Value, instance: &Value) -> Vec<String> {
    let mut root = json!({"allOf": [schema]});
    root["components"] = spec["components"].clone();
    root["$schema"] = json!("https://json-schema.org/draft/2020-12/schema");
    let validator = jsonschema::draft202012::new(&root).expect("the spec's schema compiles");
    validator
        .iter_errors(instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

#[tokio::test]
async fn what_reach_sends_and_the_emulator_answers_follow_discords_spec() {
    let spec = spec();
    let em = emulator().await;
    let rest = rest(&em);
    let app = Snowflake(em.config().application_id);
    let bot = em.config().bot_user_id;
    let ada = User::human(42, "ada");

    // ingress-edge's session start limit, as its reader reads it.
    let bot_gateway = session_limit_reader(&em)
        .read()
        .await
        .expect("GET /gateway/bot");
    assert_eq!(bot_gateway.limit.total, 1000);

    // A mention's reply, and the read that reconciles it.
    let q = em.post_user_message(CHANNEL, &ada, &format!("<@{bot}> how do I deploy?"));
    let reply = CreateMessage {
        channel_id: Snowflake(CHANNEL),
        content: "An answer, <@42>.".into(),
        nonce: Nonce::new("n-openapi-1").unwrap(),
        reply_to: Some(Snowflake(q)),
    };
    assert!(matches!(
        rest.create_message(&reply).await,
        CreateOutcome::KnownSent { .. }
    ));
    assert!(matches!(
        rest.reconcile(&reply, Snowflake(q), &mut OpenGate).await,
        Reconciliation::Found { .. }
    ));

    // An `/ask` answered by a callback, its original read, a follow-up and its read.
    let i1 = em.post_interaction(CHANNEL, &ada, "ask", "How do I deploy?");
    let t1 = InteractionToken(em.interaction_token(i1));
    let answer = InteractionReply {
        interaction_id: Snowflake(i1),
        content: "The answer.".into(),
    };
    assert!(matches!(
        rest.interaction_callback(&answer, &t1).await,
        CallbackOutcome::Sent { .. }
    ));
    assert!(matches!(
        rest.reconcile_interaction(app, Snowflake(i1), &t1, "The answer.", false, &mut OpenGate)
            .await,
        Reconciliation::Found { .. }
    ));
    let more = FollowUp {
        content: "More of it.".into(),
    };
    assert!(matches!(
        rest.execute_follow_up(app, &more, &t1).await,
        CreateOutcome::KnownSent { .. }
    ));
    assert!(matches!(
        rest.reconcile_follow_up(
            Snowflake(CHANNEL),
            Snowflake(i1),
            "More of it.",
            &mut OpenGate
        )
        .await,
        Reconciliation::Found { .. }
    ));

    // A slow `/ask`: acknowledged (type 5), then its original edited.
    let i2 = em.post_interaction(CHANNEL, &ada, "ask", "And slowly?");
    let t2 = InteractionToken(em.interaction_token(i2));
    let ack = rest
        .defer_interaction(
            &DeferredAck {
                interaction_id: Snowflake(i2),
            },
            &t2,
        )
        .await;
    assert!(
        matches!(
            ack,
            CallbackOutcome::Acknowledged | CallbackOutcome::Sent { .. }
        ),
        "{ack:?}"
    );
    let edit = OriginalEdit {
        content: "The slow answer.".into(),
    };
    assert!(matches!(
        rest.edit_original(app, &edit, &t2).await,
        CreateOutcome::KnownSent { .. }
    ));

    let mut problems = Vec::new();
    let mut checked: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    let operation =
        |method: &str, template: &str| spec["paths"][template][method.to_ascii_lowercase()].clone();
    // Every request body the adapter sent.
    let requests: Vec<(&str, &str, Value)> = em
        .create_requests()
        .into_iter()
        .map(|r| ("post", "/channels/{channel_id}/messages", r.body))
        .chain(em.callback_requests().into_iter().map(|r| {
            (
                "post",
                "/interactions/{interaction_id}/{interaction_token}/callback",
                r.body,
            )
        }))
        .chain(em.edit_requests().into_iter().map(|r| {
            (
                "patch",
                "/webhooks/{webhook_id}/{webhook_token}/messages/@original",
                r.body,
            )
        }))
        .chain(
            em.follow_up_requests()
                .into_iter()
                .map(|r| ("post", "/webhooks/{webhook_id}/{webhook_token}", r.body)),
        )
        .collect();
    for (method, template, body) in requests {
        let schema =
            &operation(method, template)["requestBody"]["content"]["application/json"]["schema"];
        assert!(!schema.is_null(), "{method} {template}: no request schema");
        for v in violations(&spec, schema, &body) {
            problems.push(format!("request {method} {template}: {v}\n  {body}"));
        }
        checked
            .entry("request")
            .or_default()
            .insert(format!("{method} {template}"));
    }
    // Every 2xx response the emulator answered with.
    for r in em.responses() {
        if !(200..300).contains(&r.status) || r.body.is_empty() {
            continue;
        }
        let template = template(&spec, &r.path)
            .unwrap_or_else(|| panic!("{} {}: not an operation of the spec", r.method, r.path));
        let responses = &operation(&r.method, template)["responses"];
        let declared = &responses[r.status.to_string()];
        let declared = if declared.is_null() {
            &responses["2XX"]
        } else {
            declared
        };
        let schema = &declared["content"]["application/json"]["schema"];
        assert!(
            !schema.is_null(),
            "{} {template} {}: no response schema",
            r.method,
            r.status
        );
        let body: Value = serde_json::from_slice(&r.body).unwrap();
        for v in violations(&spec, schema, &body) {
            problems.push(format!(
                "response {} {template} {}: {v}\n  {body}",
                r.method, r.status
            ));
        }
        checked
            .entry("response")
            .or_default()
            .insert(format!("{} {template}", r.method));
    }
    assert!(
        problems.is_empty(),
        "{} deviations from Discord's spec:\n{}",
        problems.len(),
        problems.join("\n")
    );
    // Nothing passes by checking nothing: every operation of the round trip was checked.
    assert_eq!(checked["request"].len(), 4, "{checked:?}");
    assert_eq!(checked["response"].len(), 7, "{checked:?}");
}
