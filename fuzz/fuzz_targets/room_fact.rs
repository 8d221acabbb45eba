//! A Room's facts as core reads them back from its store (crates/room `RoomFact::from_bytes`,
//! `Room::apply`): bytes that were signed once, then stored where anything could change them.
//!
//! Input: facts, one per line. Each line is read strictly and applied as it stands; when the
//! Room is open, the same body is also applied re-drafted as the Room's next fact (its seq,
//! chain and room filled in), so the fuzzer explores the state machine and not just the chain.
//!
//! Promised: never a panic; an accepted fact's bytes are its canonical bytes and read back to
//! it; a refused fact changes nothing; an applied one advances seq by one and becomes the
//! chain's head; replaying what was applied gives the same Room; every refusal is a typed
//! `room/` or `room-sign/` code.
#![no_main]

use libfuzzer_sys::fuzz_target;
use reach_room::fact::{MAX_SIGNED_BYTES, RoomFact};
use reach_room::room::Room;

fn apply(room: &mut Room, fact: &RoomFact, applied: &mut Vec<RoomFact>) {
    let before = room.clone();
    match room.apply(fact) {
        Ok(()) => {
            assert_eq!(
                room.next_seq(),
                before.next_seq() + 1,
                "seq did not advance by one"
            );
            assert_eq!(room.head(), Some(fact.digest()), "the fact is not the head");
            applied.push(fact.clone());
        }
        Err(e) => {
            assert!(
                e.code().starts_with("room/"),
                "untyped refusal {}",
                e.code()
            );
            assert_eq!(*room, before, "a refused fact changed the Room");
        }
    }
    // Reading where the Room stands never panics.
    let next = room.next();
    let _ = room.evidence_kinds_for(&next);
    let _ = room.over_wall(fact.at_ms.saturating_add(1));
    let _ = room.rounds_left();
}

fuzz_target!(|data: &[u8]| {
    let mut room = Room::new();
    let mut applied = Vec::new();
    for line in data.split(|b| *b == b'\n') {
        let fact = match RoomFact::from_bytes(line) {
            Ok(f) => f,
            Err(e) => {
                let code = e.code();
                assert!(
                    code.starts_with("room/") || code.starts_with("room-sign/"),
                    "untyped refusal {code}"
                );
                if line.len() > MAX_SIGNED_BYTES {
                    assert_eq!(code, "room-sign/too-large");
                }
                continue;
            }
        };
        assert_eq!(
            fact.canonical_bytes(),
            line,
            "accepted a non-canonical spelling"
        );
        assert_eq!(
            RoomFact::from_bytes(&fact.canonical_bytes()),
            Ok(fact.clone())
        );
        apply(&mut room, &fact, &mut applied);
        if let Some(drafted) = room.draft(fact.at_ms, fact.body.clone()) {
            apply(&mut room, &drafted, &mut applied);
        }
    }
    if !applied.is_empty() {
        let replayed = Room::replay(&applied).expect("what applied replays");
        assert_eq!(replayed, room, "replay differs from the applied Room");
    }
});
