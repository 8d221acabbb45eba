//! Ward signs every Room record with the node's ed25519 key; core only asks.

use reach_proto::ward::v1 as ward_pb;
use reach_proto::ward::v1::ward_client::WardClient;
use reach_room::fact::SignedKind;
use tonic::Status;
use tonic::transport::Channel;

/// A record as ward signed it; the signature hex-encoded, as the ledger keeps it.
#[derive(Debug, Clone)]
pub struct Signed {
    pub signature: String,
    pub key_id: String,
}

/// Asks ward to sign `bytes` as a record of `kind`. Signing the same bytes again is harmless,
/// so a ward that is unreachable for a while (a restart) is asked again
/// ([`reach_experiment::ward_call`]).
pub async fn sign(
    ward: &WardClient<Channel>,
    kind: SignedKind,
    bytes: &[u8],
) -> Result<Signed, Status> {
    let request = ward_pb::SignRoomRecordRequest {
        kind: kind.name().into(),
        record: bytes.to_vec(),
    };
    let r = reach_experiment::ward_call(ward, |mut ward| {
        let request = request.clone();
        async move { ward.sign_room_record(request).await }
    })
    .await?;
    Ok(Signed {
        signature: hex::encode(r.signature),
        key_id: r.key_id,
    })
}

/// The node's public key, as ward states it.
pub async fn public_key(ward: &WardClient<Channel>) -> Result<Vec<u8>, Status> {
    Ok(ward
        .clone()
        .room_key(ward_pb::RoomKeyRequest {})
        .await?
        .into_inner()
        .public_key)
}

/// A stored signature's bytes (the ledger keeps them hex-encoded).
pub fn signature_bytes(stored: &str) -> Result<Vec<u8>, Status> {
    hex::decode(stored).map_err(|_| Status::internal("room/stored-signature: not hex"))
}
