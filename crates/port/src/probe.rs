//! Probing a port's refusals from the outside (the audit, the container probe, tests): a unary
//! call with an empty message, and how to read how it ended. An empty message carries no
//! request a handler would act on, so what comes back is the port's own answer: the
//! handshake's, the authorization layer's, or the handler's refusal of the empty request.

use std::error::Error;

use tonic::transport::Channel;

/// Sends `request` (an empty message, with whatever metadata the prober set) to `path`.
pub async fn call_empty(
    channel: Channel,
    path: http::uri::PathAndQuery,
    request: tonic::Request<()>,
) -> Result<(), tonic::Status> {
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready()
        .await
        .map_err(|e| tonic::Status::from_error(e.into()))?;
    grpc.unary(request, path, tonic_prost::ProstCodec::<(), ()>::default())
        .await
        .map(|_| ())
}

/// Whether a failed call's code is the transport failing, as it does when the server refuses
/// the client's certificate at the handshake. A port that is down fails the same way: tell
/// them apart by a call the same port answers.
pub fn refused_at_handshake(code: tonic::Code) -> bool {
    matches!(
        code,
        tonic::Code::Unavailable | tonic::Code::Unknown | tonic::Code::Cancelled
    )
}

/// `e`'s message and every cause below it, joined with ": " (a refused handshake says why
/// only in its causes). A cause that only repeats the message above it (an I/O error wrapped
/// with its own text) is said once.
pub fn error_chain(e: &dyn Error) -> String {
    let mut last = e.to_string();
    let mut s = last.clone();
    let mut source = e.source();
    while let Some(inner) = source {
        let text = inner.to_string();
        if text != last {
            s.push_str(": ");
            s.push_str(&text);
        }
        last = text;
        source = inner.source();
    }
    s
}
