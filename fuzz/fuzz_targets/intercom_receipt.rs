//! The peer's enrollment receipt (crates/intercom `EnrollmentReceipt`), as core reads it from
//! its `settings.intercom.receipt`: JSON or TOML written by the operator.
//!
//! Promised: the receipt parses strictly (only `peer`, `binding` and `resend`; `resend` one of
//! the two kinds, `max_resends` only with the guarantee); it admits resends only for the exact
//! peer and binding it names, never more than its `max_resends`, and none without the
//! guarantee; JSON and TOML read the same receipt the same way.
#![no_main]

use libfuzzer_sys::fuzz_target;
use reach_intercom::{EnrollmentReceipt, RECEIPT_BINDING, ResendGuarantee};
use serde_json::Value;

const KEYS: [&str; 3] = ["peer", "binding", "resend"];

/// What the document itself says, read without the receipt's types.
fn expected(v: &Value) -> Option<(String, String, u32)> {
    let o = v.as_object()?;
    if o.keys().any(|k| !KEYS.contains(&k.as_str())) {
        return None;
    }
    let peer = o.get("peer")?.as_str()?.to_owned();
    let binding = o.get("binding")?.as_str()?.to_owned();
    let max = match o.get("resend") {
        None => 0,
        Some(r) => {
            let r = r.as_object()?;
            match r.get("kind")?.as_str()? {
                "none" if r.len() == 1 => 0,
                "same-message-resolves-to-original-task" if r.len() == 2 => {
                    u32::try_from(r.get("max_resends")?.as_u64()?).ok()?
                }
                _ => return None,
            }
        }
    };
    Some((peer, binding, max))
}

fn check(r: &EnrollmentReceipt, peer: &str, binding: &str, max: u32) {
    assert_eq!((r.peer.as_str(), r.binding.as_str()), (peer, binding));
    let admitted = r.resends_admitted(peer);
    if binding == RECEIPT_BINDING {
        assert_eq!(admitted, max, "resends differ from what the receipt says");
    } else {
        assert_eq!(admitted, 0, "a receipt for another binding admitted a resend");
    }
    if matches!(r.resend, ResendGuarantee::None) {
        assert_eq!(admitted, 0);
    }
    let other = format!("{peer}/other");
    assert_eq!(r.resends_admitted(&other), 0, "a receipt admitted another peer");
}

// Bytes: the form (0 JSON, else TOML), then the document.
fuzz_target!(|data: &[u8]| {
    let Some((&form, doc)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(doc) else {
        return;
    };
    let (parsed, value) = if form == 0 {
        (
            serde_json::from_str::<EnrollmentReceipt>(text),
            serde_json::from_str::<Value>(text).ok(),
        )
    } else {
        let Ok(table) = toml::from_str::<toml::Table>(text) else {
            assert!(toml::from_str::<EnrollmentReceipt>(text).is_err());
            return;
        };
        let value = serde_json::to_value(&table).ok();
        match value.as_ref().map(|v| serde_json::from_value::<EnrollmentReceipt>(v.clone())) {
            // TOML reads the same receipt as its JSON form does.
            Some(via_json) => {
                let direct = toml::from_str::<EnrollmentReceipt>(text);
                assert_eq!(direct.as_ref().ok(), via_json.as_ref().ok(), "TOML and JSON differ");
                (via_json, value)
            }
            None => return,
        }
    };
    let want = value.as_ref().and_then(expected);
    match (&parsed, want) {
        (Ok(r), Some((peer, binding, max))) => check(r, &peer, &binding, max),
        (Ok(r), None) => panic!("accepted a receipt outside its form: {r:?}"),
        // serde_json's Value keeps the last of a repeated key; the receipt refuses the repeat.
        (Err(e), Some(w)) if !e.to_string().contains("duplicate field") => {
            panic!("refused a well-formed receipt {w:?}: {e}")
        }
        (Err(_), _) => {}
    }
});
