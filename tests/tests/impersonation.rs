//! The impersonation matrix: for every (caller, port, method) triple of the checked-in
//! manifest, a real call with the caller's real certificate reaches the handler if and only if
//! the port table allows it. A caller the port admits for some other method gets
//! PERMISSION_DENIED from the authorization layer; a caller the port does not admit at all
//! fails the handshake.

use reach_tests::{TestBody, call, reached_handler, refused_at_handshake};
use tonic::Code;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_triple_succeeds_iff_the_port_table_allows_it() {
    let body = TestBody::start().await;
    let m = body.manifest.clone();
    let mut callers: Vec<String> = m.roles.iter().map(|r| r.name.as_str().to_owned()).collect();
    callers.push("operator".into());

    let (mut allowed, mut denied_authz, mut denied_handshake) = (0, 0, 0);
    for caller in &callers {
        let material = body.material(caller);
        for port in &m.ports {
            let admitted = port.grants.iter().any(|g| g.caller == *caller);
            let server = m.principal(port.server.as_str());
            for method in reach_proto::methods_of(&port.service).unwrap() {
                let may = port
                    .grants
                    .iter()
                    .any(|g| g.caller == *caller && g.method == *method);
                // A fresh connection per call, so every call runs its own handshake.
                let ch =
                    reach_port::connect_lazy(body.socket(&port.name), &material, server.clone());
                let code = call(ch, &port.path(method)).await;
                let what = format!("{caller} -> {} {}", port.name, port.path(method));
                if may {
                    // A server-streaming method with nothing to stream yet never completes the
                    // unary probe: still open at the deadline means the port let it through.
                    let streaming = *method == "WatchHilRequests";
                    assert!(
                        reached_handler(code) || (streaming && code == Code::DeadlineExceeded),
                        "{what}: allowed but got {code:?}"
                    );
                    allowed += 1;
                } else if admitted {
                    assert_eq!(
                        code,
                        Code::PermissionDenied,
                        "{what}: must be refused by the port table"
                    );
                    denied_authz += 1;
                } else {
                    assert!(
                        refused_at_handshake(code),
                        "{what}: must fail the handshake, got {code:?}"
                    );
                    denied_handshake += 1;
                }
            }
        }
    }
    println!(
        "impersonation matrix: {} triples — {allowed} allowed, {denied_authz} refused by method, {denied_handshake} refused at handshake",
        allowed + denied_authz + denied_handshake
    );
    assert!(allowed >= 18 && denied_authz > 0 && denied_handshake > 0);
    body.stop().await;
}
