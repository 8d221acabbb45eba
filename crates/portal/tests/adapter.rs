//! The chat completions adapter against the model emulator over TLS on an admitted local road:
//! what is adopted, what is quarantined, what fails, and what is never sent.

use std::sync::Arc;
use std::time::Duration;

use reach_destination::roads::{ConfiguredResolver, Road, Roads};
use reach_destination::{AdmissionPolicy, PinnedConnector, RecordingDialer, TcpDialer};
use reach_digest::Sha256Digest;
use reach_model_emulator::{HOST, KEY, ModelEmulator, Script};
use reach_portal::{
    ApiKey, Bounds, CallFailure, CutInput, EvidenceIn, Expectation, PortalClient, PortalConfig,
    PrivacyCut, cut, portal_bounds, quarantine,
};

fn the_cut(passages: u32) -> PrivacyCut {
    cut(&CutInput {
        question: "How is an unknown Discord delivery settled?".into(),
        bundle_digest: Sha256Digest::of(b"bundle"),
        revision: "0123abc".into(),
        passages: (1..=passages)
            .map(|i| {
                let text = format!("Passage {i}: an UNKNOWN delivery is reconciled, never resent.");
                EvidenceIn {
                    passage_id: format!("p-{i:04}"),
                    digest: Sha256Digest::of(text.as_bytes()),
                    section: "Delivery".into(),
                    url: format!("https://example.test/blob/0123abc/ARCHITECTURE.md#L{i}"),
                    text,
                }
            })
            .collect(),
        withheld: vec!["subject_id", "sigil_id", "channel_id"],
    })
    .expect("cut")
}

struct Rig {
    emulator: ModelEmulator,
    _dir: tempfile::TempDir,
    roads: Roads,
}

async fn rig() -> Rig {
    let emulator = ModelEmulator::start().await.expect("emulator");
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("model-ca.pem");
    std::fs::write(&ca, emulator.ca_pem()).unwrap();
    let roads = Roads {
        local_roads: vec![Road {
            host: HOST.into(),
            addr: emulator.addr(),
        }],
        ca_file: Some(ca),
        name_servers: vec![],
    };
    Rig {
        emulator,
        _dir: dir,
        roads,
    }
}

impl Rig {
    fn client(&self, streaming: bool) -> PortalClient<ConfiguredResolver, TcpDialer> {
        self.client_for(&self.emulator.endpoint(), streaming, TcpDialer)
    }

    fn client_for<D: reach_destination::Dialer>(
        &self,
        endpoint: &str,
        streaming: bool,
        dialer: D,
    ) -> PortalClient<ConfiguredResolver, D> {
        PortalClient::new(PortalConfig {
            endpoint: endpoint.into(),
            model: reach_model_emulator::MODEL.into(),
            key: ApiKey::from_bytes(KEY.as_bytes()).unwrap(),
            streaming,
            constrain: reach_portal::Constrain::None,
            admission: Arc::new(self.roads.admission(AdmissionPolicy::default()).unwrap()),
            connector: PinnedConnector::new(self.roads.roots().unwrap(), dialer),
            bounds: portal_bounds(),
        })
        .expect("client")
    }
}

/// One call, then the quarantine core would run.
async fn ask(rig: &Rig, streaming: bool, passages: u32) -> Result<reach_portal::Adopted, String> {
    let c = the_cut(passages);
    let ret = rig
        .client(streaming)
        .complete(&c.payload, 512)
        .await
        .map_err(|f| f.code())?;
    let withheld = vec!["1100000000000000100".to_owned()];
    quarantine(
        &ret,
        &Expectation {
            model: reach_model_emulator::MODEL,
            payload: &c.payload,
            withheld: &withheld,
        },
    )
    .map_err(|q| q.code())
}

#[tokio::test]
async fn a_good_answer_is_adopted_streaming_or_not() {
    let rig = rig().await;
    for streaming in [false, true] {
        let a = ask(&rig, streaming, 2).await.expect("adopted");
        assert!(
            a.text.contains("[1]") && a.text.contains("[2]"),
            "{}",
            a.text
        );
        assert_eq!(a.citations.len(), 2);
        assert_eq!(a.citations[0].passage_id, "p-0001");
    }
    let seen = rig.emulator.requests();
    assert_eq!(seen.len(), 2);
    assert!(!seen[0].streaming() && seen[1].streaming());
    let r = &seen[0];
    assert_eq!(r.authorization.as_deref(), Some("Bearer sk-emulator-key"));
    let host = format!("{HOST}:{}", rig.emulator.addr().port());
    assert_eq!(r.host.as_deref(), Some(host.as_str()));
    // The question and the fenced passages travel; the withheld fields' names and the key do not.
    let user = r.user_message();
    assert!(user.contains("How is an unknown Discord delivery settled?"));
    assert!(user.contains("[2] Delivery (https://example.test/blob/0123abc/ARCHITECTURE.md#L2)"));
    for absent in ["subject_id", "sigil_id", "channel_id", "sk-emulator-key"] {
        assert!(!r.body.contains(absent), "{absent} left the body");
    }
}

#[tokio::test]
async fn scripted_bad_answers_are_quarantined_with_their_code() {
    let rig = rig().await;
    let cases = [
        (Script::Cites(7), false, "quarantine/citation-out-of-bundle"),
        (Script::Cites(7), true, "quarantine/citation-out-of-bundle"),
        (Script::NoCitation, false, "quarantine/no-citation"),
        (Script::NoCitation, true, "quarantine/no-citation"),
        (Script::Truncated, true, "quarantine/truncated"),
        (Script::Truncated, false, "quarantine/truncated"),
        (Script::OverLong(5_000), false, "quarantine/over-long"),
        (Script::OverLong(5_000), true, "quarantine/over-long"),
        (Script::WrongModel, false, "quarantine/correlation"),
    ];
    for (script, streaming, want) in cases {
        rig.emulator.script(script.clone());
        assert_eq!(
            ask(&rig, streaming, 4).await.unwrap_err(),
            want,
            "{script:?} streaming={streaming}"
        );
    }
}

#[tokio::test]
async fn provider_failures_are_typed_and_say_bytes_left() {
    let rig = rig().await;
    let c = the_cut(1);
    rig.emulator.script(Script::Status(503));
    let f = rig
        .client(false)
        .complete(&c.payload, 512)
        .await
        .unwrap_err();
    assert_eq!(
        f,
        CallFailure::Failed {
            code: "provider/http-503".into()
        }
    );
    assert!(f.transmitted());

    rig.emulator.script(Script::Status(503));
    let f = rig
        .client(true)
        .complete(&c.payload, 512)
        .await
        .unwrap_err();
    assert_eq!(f.code(), "provider/http-503");

    // A slow provider is cut at the head-time bound.
    rig.emulator.script(Script::Slow(Duration::from_secs(3)));
    let client = PortalClient::new(PortalConfig {
        bounds: reach_bounded_head(Duration::from_millis(300)),
        ..config_of(&rig, false)
    })
    .unwrap();
    let f = client.complete(&c.payload, 512).await.unwrap_err();
    assert_eq!(f.code(), "bounded/head-time");
    assert!(f.transmitted());

    // A wrong key is the provider's 401.
    let wrong = PortalClient::new(PortalConfig {
        key: ApiKey::from_bytes(b"sk-wrong").unwrap(),
        ..config_of(&rig, false)
    })
    .unwrap();
    let f = wrong.complete(&c.payload, 512).await.unwrap_err();
    assert_eq!(f.code(), "provider/http-401");
}

fn reach_bounded_head(head: Duration) -> Bounds {
    Bounds {
        max_head_time: head,
        ..portal_bounds()
    }
}

fn config_of(rig: &Rig, streaming: bool) -> PortalConfig<ConfiguredResolver, TcpDialer> {
    PortalConfig {
        endpoint: rig.emulator.endpoint(),
        model: reach_model_emulator::MODEL.into(),
        key: ApiKey::from_bytes(KEY.as_bytes()).unwrap(),
        streaming,
        constrain: reach_portal::Constrain::None,
        admission: Arc::new(rig.roads.admission(AdmissionPolicy::default()).unwrap()),
        connector: PinnedConnector::new(rig.roads.roots().unwrap(), TcpDialer),
        bounds: portal_bounds(),
    }
}

#[tokio::test]
async fn an_endpoint_off_the_road_is_never_dialed() {
    let rig = rig().await;
    let c = the_cut(1);
    // Same name, another port: not the road, and 8443 is not an admitted public port.
    let other = format!("https://{HOST}:8443/v1/chat/completions");
    let client = rig.client_for(&other, false, RecordingDialer::new());
    let f = client.complete(&c.payload, 512).await.unwrap_err();
    assert!(!f.transmitted(), "{f:?}");
    assert!(f.code().starts_with("destination/"), "{}", f.code());
    assert!(client.connector().dialer().dials().is_empty());
    assert!(rig.emulator.requests().is_empty());
    // A non-canonical endpoint is refused when the adapter is built.
    let sloppy = format!(
        "https://{HOST}:{}//v1/chat/completions#x",
        rig.emulator.addr().port()
    );
    assert!(
        PortalClient::new(PortalConfig {
            endpoint: sloppy,
            ..config_of(&rig, false)
        })
        .is_err()
    );
}
