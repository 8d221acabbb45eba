//! A minimal QMP client: the QEMU Machine Protocol over the instance's control socket.
//!
//! Only what the broker needs: the capabilities handshake, `query-status` and `quit`.
//! Every reply line is bounded, and asynchronous events are skipped.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

/// A QMP reply is small; anything longer is not a reply we asked for.
pub const MAX_QMP_LINE: u64 = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub enum QmpError {
    /// the QMP socket could not be used
    #[error("qmp io: {0}")]
    Io(#[from] std::io::Error),
    /// QEMU did not answer in time
    #[error("qmp timed out")]
    Timeout,
    /// the socket closed
    #[error("qmp socket closed")]
    Closed,
    /// QEMU answered with an error or something that is not QMP
    #[error("qmp protocol: {0}")]
    Protocol(String),
}

#[derive(Debug)]
pub struct Qmp {
    reader: BufReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
    timeout: Duration,
}

impl Qmp {
    /// Connects and negotiates capabilities.
    pub async fn connect(path: &Path, timeout: Duration) -> Result<Self, QmpError> {
        let stream = tokio::time::timeout(timeout, UnixStream::connect(path))
            .await
            .map_err(|_| QmpError::Timeout)??;
        let (r, w) = stream.into_split();
        let mut q = Qmp {
            reader: BufReader::new(r),
            writer: w,
            timeout,
        };
        let greeting = q.read_value().await?;
        if greeting.get("QMP").is_none() {
            return Err(QmpError::Protocol(format!("no greeting: {greeting}")));
        }
        q.execute("qmp_capabilities", None).await?;
        Ok(q)
    }

    async fn read_value(&mut self) -> Result<Value, QmpError> {
        let mut line = Vec::new();
        let n = tokio::time::timeout(
            self.timeout,
            (&mut self.reader)
                .take(MAX_QMP_LINE)
                .read_until(b'\n', &mut line),
        )
        .await
        .map_err(|_| QmpError::Timeout)??;
        if n == 0 {
            return Err(QmpError::Closed);
        }
        serde_json::from_slice(&line).map_err(|e| QmpError::Protocol(e.to_string()))
    }

    /// Runs one command and returns its `return` value.
    pub async fn execute(
        &mut self,
        command: &str,
        arguments: Option<Value>,
    ) -> Result<Value, QmpError> {
        let mut msg = json!({ "execute": command });
        if let Some(a) = arguments {
            msg["arguments"] = a;
        }
        let mut bytes = serde_json::to_vec(&msg).expect("json");
        bytes.push(b'\n');
        self.writer.write_all(&bytes).await?;
        loop {
            let v = self.read_value().await?;
            if v.get("event").is_some() {
                continue;
            }
            if let Some(r) = v.get("return") {
                return Ok(r.clone());
            }
            if let Some(e) = v.get("error") {
                return Err(QmpError::Protocol(e.to_string()));
            }
            return Err(QmpError::Protocol(format!("unexpected reply: {v}")));
        }
    }

    /// Asks QEMU to exit. The reply may be lost when QEMU closes the socket first, so a
    /// closed socket counts as accepted; the caller confirms by watching the process.
    pub async fn quit(mut self) -> Result<(), QmpError> {
        match self.execute("quit", None).await {
            Ok(_) | Err(QmpError::Closed) => Ok(()),
            Err(QmpError::Io(e)) if e.kind() == std::io::ErrorKind::ConnectionReset => Ok(()),
            Err(e) => Err(e),
        }
    }
}
