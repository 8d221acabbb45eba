//! The bounded HTTP/1.1 reader: hyper's client connection over the metered pinned stream,
//! with status, type, encoding and time bounds checked here and the decoded body streamed
//! through the expander, the tokenizer and (for JSON) the structure scan.

use std::collections::VecDeque;

use bytes::Bytes;
use http::header::{CONTENT_ENCODING, CONTENT_TYPE};
use http::{HeaderMap, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use reach_destination::PinnedStream;
use tokio::task::JoinHandle;
use tokio::time::{Instant, timeout_at};

use crate::ReturnError;
use crate::bounds::{Bound, BoundViolation, Bounds};
use crate::scan::{Expander, JsonScan, Tokenizer};
use crate::wire::{Metered, Slot, take};

/// A complete return that passed every bound.
#[derive(Debug, Clone)]
pub struct BoundedResponse {
    /// The status (one of [`Bounds::allowed_statuses`]).
    pub status: StatusCode,
    /// The response headers.
    pub headers: HeaderMap,
    /// The decoded body.
    pub body: Bytes,
    /// Tokens counted by the approximation.
    pub tokens: u64,
}

/// Aborts the connection task when dropped, which closes the socket.
#[derive(Debug)]
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// An open response whose head passed the bounds.
#[derive(Debug)]
struct Open {
    status: StatusCode,
    headers: HeaderMap,
    body: Incoming,
    expander: Expander,
    tokens: Tokenizer,
    slot: Slot,
    bounds: Bounds,
    started: Instant,
    deadline: Instant,
    done: bool,
    _conn: AbortOnDrop,
}

fn media_type(headers: &HeaderMap) -> String {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .unwrap_or_default()
}

impl Open {
    async fn start(
        stream: PinnedStream,
        request: Request<Bytes>,
        bounds: &Bounds,
    ) -> Result<Open, ReturnError> {
        stream.admitted().check_request(&request)?;
        let slot = Slot::default();
        let io = TokioIo::new(Metered::new(stream, bounds.clone(), slot.clone()));
        let (mut sender, conn) = hyper::client::conn::http1::Builder::new()
            // The meter counts headers first; hyper's own limit only backs it up.
            .max_headers(
                usize::try_from(bounds.max_header_count)
                    .unwrap_or(usize::MAX)
                    .saturating_add(1),
            )
            .handshake::<_, Full<Bytes>>(io)
            .await
            .map_err(|e| ReturnError::Protocol(e.to_string()))?;
        let conn = AbortOnDrop(tokio::spawn(async move {
            let _ = conn.await;
        }));
        let started = Instant::now();
        let deadline = started + bounds.max_stream_time;
        let head_deadline = deadline.min(started + bounds.max_head_time);
        let response =
            match timeout_at(head_deadline, sender.send_request(request.map(Full::new))).await {
                Err(_) => {
                    let bound = if head_deadline == deadline {
                        Bound::StreamTime
                    } else {
                        Bound::HeadTime
                    };
                    let limit = if bound == Bound::StreamTime {
                        bounds.max_stream_time
                    } else {
                        bounds.max_head_time
                    };
                    return Err(time_violation(bound, limit, started).into());
                }
                Ok(Err(e)) => return Err(failure(&slot, e)),
                Ok(Ok(response)) => response,
            };
        let (parts, body) = response.into_parts();
        if !bounds.allowed_statuses.contains(&parts.status.as_u16()) {
            return Err(
                BoundViolation::new(Bound::Status, 0, u64::from(parts.status.as_u16())).into(),
            );
        }
        let media = media_type(&parts.headers);
        if !bounds
            .allowed_content_types
            .iter()
            .any(|t| t.eq_ignore_ascii_case(&media))
        {
            return Err(BoundViolation::new(Bound::ContentType, 0, 0).into());
        }
        let encoding = parts
            .headers
            .get(CONTENT_ENCODING)
            .map(|v| v.to_str().unwrap_or("?").trim().to_ascii_lowercase());
        let gzip = match encoding.as_deref() {
            None | Some("identity") => false,
            Some("gzip") => true,
            Some(_) => return Err(BoundViolation::new(Bound::ContentEncoding, 0, 0).into()),
        };
        Ok(Open {
            status: parts.status,
            headers: parts.headers,
            body,
            expander: Expander::new(gzip, bounds),
            tokens: Tokenizer::new(),
            slot,
            bounds: bounds.clone(),
            started,
            deadline,
            done: false,
            _conn: conn,
        })
    }

    /// The next decoded bytes, already counted by the tokenizer; `None` at the end.
    async fn next_decoded(&mut self) -> Result<Option<Vec<u8>>, ReturnError> {
        loop {
            if self.done {
                return Ok(None);
            }
            let idle_deadline = self
                .deadline
                .min(Instant::now() + self.bounds.max_idle_time);
            let out = match timeout_at(idle_deadline, self.body.frame()).await {
                Err(_) => {
                    let violation = if idle_deadline == self.deadline {
                        time_violation(Bound::StreamTime, self.bounds.max_stream_time, self.started)
                    } else {
                        let idle = self.bounds.max_idle_time.as_millis() as u64;
                        BoundViolation::new(Bound::IdleTime, idle, idle)
                    };
                    return Err(violation.into());
                }
                Ok(None) => {
                    self.done = true;
                    self.expander.finish()?
                }
                Ok(Some(Err(e))) => return Err(failure(&self.slot, e)),
                Ok(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => self.expander.push(&data)?,
                    Err(_trailers) => continue,
                },
            };
            if let Some(v) = take(&self.slot) {
                return Err(v.into());
            }
            self.tokens.feed(&out, &self.bounds)?;
            if !out.is_empty() {
                return Ok(Some(out));
            }
        }
    }
}

fn time_violation(bound: Bound, limit: std::time::Duration, started: Instant) -> BoundViolation {
    BoundViolation::new(
        bound,
        limit.as_millis() as u64,
        started.elapsed().as_millis() as u64,
    )
}

/// A hyper failure, named by the meter's violation when the meter caused it.
fn failure(slot: &Slot, e: hyper::Error) -> ReturnError {
    match take(slot) {
        Some(v) => v.into(),
        None => ReturnError::Protocol(e.to_string()),
    }
}

/// Send `request` on the pinned stream and read the whole return under `bounds`. The request
/// must match the stream's admitted destination (Host, authority, path), or nothing is sent.
/// A JSON return (`application/json` or `+json`) is pre-scanned for depth and items.
pub async fn fetch(
    stream: PinnedStream,
    request: Request<Bytes>,
    bounds: &Bounds,
) -> Result<BoundedResponse, ReturnError> {
    let mut open = Open::start(stream, request, bounds).await?;
    let media = media_type(&open.headers);
    let mut json = (media == "application/json" || media.ends_with("+json")).then(JsonScan::new);
    let mut body = Vec::new();
    while let Some(bytes) = open.next_decoded().await? {
        if let Some(scan) = json.as_mut() {
            scan.feed(&bytes, bounds)?;
        }
        body.extend_from_slice(&bytes);
    }
    Ok(BoundedResponse {
        status: open.status,
        headers: std::mem::take(&mut open.headers),
        body: Bytes::from(body),
        tokens: open.tokens.tokens(),
    })
}

/// One server-sent event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field, if any.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
    /// The `id:` field, if any.
    pub id: Option<String>,
}

/// A bounded `text/event-stream` return, read event by event (streaming chat completions).
/// Every bound of [`fetch`] applies to the whole stream; each event's data is also bounded by
/// [`Bounds::max_sse_line_bytes`] and JSON-scanned when it is JSON; the number of events by
/// [`Bounds::max_sse_events`]. Lines end in LF or CRLF (a bare CR is not a line end here).
#[derive(Debug)]
pub struct SseStream {
    open: Open,
    pending: VecDeque<u8>,
    decoder: SseDecoder,
}

/// The line and event machine of [`SseStream`]: bytes in, events out, under
/// [`Bounds::max_sse_line_bytes`], [`Bounds::max_sse_events`] and the JSON scan of each JSON
/// event. Public so the fuzz targets (`fuzz/`) feed it bytes; an egress role reads events
/// through [`fetch_sse`].
#[derive(Debug, Default)]
pub struct SseDecoder {
    line: Vec<u8>,
    current: SseEvent,
    has_field: bool,
    events: u64,
}

/// Send `request` and open a bounded event stream (the return must be `text/event-stream`).
pub async fn fetch_sse(
    stream: PinnedStream,
    request: Request<Bytes>,
    bounds: &Bounds,
) -> Result<SseStream, ReturnError> {
    let open = Open::start(stream, request, bounds).await?;
    if media_type(&open.headers) != "text/event-stream" {
        return Err(BoundViolation::new(Bound::ContentType, 0, 0).into());
    }
    Ok(SseStream {
        open,
        pending: VecDeque::new(),
        decoder: SseDecoder::new(),
    })
}

impl SseStream {
    /// The response status.
    pub fn status(&self) -> StatusCode {
        self.open.status
    }

    /// The response headers.
    pub fn headers(&self) -> &HeaderMap {
        &self.open.headers
    }

    /// Tokens counted so far.
    pub fn tokens(&self) -> u64 {
        self.open.tokens.tokens()
    }

    /// The next event, or `None` when the stream ended (an unterminated last event is
    /// dropped, as the SSE specification says).
    pub async fn next_event(&mut self) -> Result<Option<SseEvent>, ReturnError> {
        let bounds = self.open.bounds.clone();
        loop {
            if let Some(event) = self.decoder.next_event(&mut self.pending, &bounds)? {
                return Ok(Some(event));
            }
            match self.open.next_decoded().await? {
                Some(bytes) => self.pending.extend(bytes),
                None => return Ok(None),
            }
        }
    }
}

impl SseDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        SseDecoder::default()
    }

    /// Consume bytes from the front of `pending` until one event completes (returned, the
    /// rest left in `pending`) or `pending` is empty (`None`; a partial line or event is kept
    /// for the next bytes). Lines end in LF or CRLF.
    pub fn next_event(
        &mut self,
        pending: &mut VecDeque<u8>,
        bounds: &Bounds,
    ) -> Result<Option<SseEvent>, ReturnError> {
        while let Some(byte) = pending.pop_front() {
            if byte != b'\n' {
                self.line.push(byte);
                crate::bounds::check(
                    Bound::SseLineBytes,
                    bounds.max_sse_line_bytes,
                    self.line.len() as u64,
                )?;
                continue;
            }
            if self.line.last() == Some(&b'\r') {
                self.line.pop();
            }
            let line = std::mem::take(&mut self.line);
            if let Some(event) = self.handle_line(&line, bounds)? {
                return Ok(Some(event));
            }
        }
        Ok(None)
    }

    fn handle_line(
        &mut self,
        line: &[u8],
        bounds: &Bounds,
    ) -> Result<Option<SseEvent>, ReturnError> {
        if line.is_empty() {
            if !self.has_field {
                return Ok(None);
            }
            self.has_field = false;
            self.events += 1;
            crate::bounds::check(Bound::SseEvents, bounds.max_sse_events, self.events)?;
            let event = std::mem::take(&mut self.current);
            let trimmed = event.data.trim_start();
            if trimmed.starts_with('{') || trimmed.starts_with('[') {
                JsonScan::new().feed(event.data.as_bytes(), bounds)?;
            }
            return Ok(Some(event));
        }
        if line[0] == b':' {
            return Ok(None);
        }
        let text = std::str::from_utf8(line)
            .map_err(|_| ReturnError::Protocol("event stream line is not UTF-8".into()))?;
        let (field, value) = match text.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (text, ""),
        };
        match field {
            "data" => {
                if self.has_field && !self.current.data.is_empty() {
                    self.current.data.push('\n');
                }
                self.current.data.push_str(value);
                crate::bounds::check(
                    Bound::SseLineBytes,
                    bounds.max_sse_line_bytes,
                    self.current.data.len() as u64,
                )?;
            }
            "event" => self.current.event = Some(value.to_owned()),
            "id" => self.current.id = Some(value.to_owned()),
            _ => return Ok(None),
        }
        self.has_field = true;
        Ok(None)
    }
}
