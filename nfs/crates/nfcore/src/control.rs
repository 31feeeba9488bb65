//! Control requests from the stats/health HTTP thread to the runtime thread, which owns the store:
//! export the per-flow state, import it (and leave buffering mode). Used by the OpenNF-style
//! move of local-state NFs (`GET /state`, `PUT /state`), and leave buffering mode without a state
//! (`POST /release`: the order-preserving move of an NF whose state is in the tier), enter it
//! while running (`POST /hold`: the instances that stay in a scale-in), and answer
//! once drained (`POST /drain`, [`crate::drain`]); see [`crate::runtime::Runtime::serve_control`].

use crate::drain::{DrainReport, DrainRequest};
use flowstore::FlowStore;
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::Duration;

/// Largest state body accepted by `PUT /state`.
pub const MAX_STATE_BYTES: usize = 256 << 20;

/// What the HTTP thread asks of the runtime.
pub enum Request {
    /// Serialise the store (between two batches: a consistent snapshot).
    Export,
    /// Replace the store by this one (decoded and built by the HTTP thread from `PUT /state`, so
    /// the runtime thread, which must keep draining its port's ring, only swaps it in), then process
    /// the buffered packets in order and leave buffering mode.
    Install {
        store: Box<dyn FlowStore>,
        entries: usize,
    },
    /// Leave buffering mode keeping the store (state in the tier): process the buffered packets
    /// in order, then go on as a normal instance.
    Release,
    /// Enter buffering mode now (`POST /hold`): frames taken from here on are queued (at most
    /// this many; more are counted as overflow) until a [`Request::Release`]. What a scale-in asks
    /// of the instances that stay, so the flows of a leaving instance do not overtake its last
    /// packets; frames received before the hold are processed first.
    Hold(usize),
    /// Answer once drained ([`crate::drain`]), or at the request's deadline.
    Drain(DrainRequest),
    /// Apply a new config without a restart (`PUT /config`): the NF's own part through
    /// [`crate::NetworkFunction::reconfigure`]; refused (409) when a runtime option changes or
    /// the NF cannot change in place, 400 when the NF refuses the config.
    Reconfigure(serde_json::Value),
}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Request::Export => write!(f, "Export"),
            Request::Install { entries, .. } => write!(f, "Install({entries} entries)"),
            Request::Release => write!(f, "Release"),
            Request::Hold(cap) => write!(f, "Hold({cap})"),
            Request::Drain(d) => write!(f, "Drain({d:?})"),
            Request::Reconfigure(_) => write!(f, "Reconfigure"),
        }
    }
}

/// The runtime's answer.
#[derive(Debug, PartialEq)]
pub enum Reply {
    State(Vec<u8>),
    Imported {
        entries: usize,
        replayed: u64,
        overflow: u64,
    },
    Released {
        replayed: u64,
        overflow: u64,
    },
    Drain(DrainReport),
    Reconfigured,
    /// Buffering from now on; `pending` frames released earlier and not processed yet were put
    /// first in its queue.
    Holding {
        pending: u64,
    },
}

/// A refused request: HTTP status and message.
#[derive(Debug, PartialEq, Eq)]
pub struct ControlError {
    pub status: u16,
    pub message: String,
}

impl ControlError {
    pub fn new(status: u16, message: impl Into<String>) -> ControlError {
        ControlError {
            status,
            message: message.into(),
        }
    }
}

pub type Envelope = (Request, mpsc::SyncSender<Result<Reply, ControlError>>);

/// The HTTP side's handle: sends a request and waits for the runtime's answer.
#[derive(Debug)]
pub struct ControlHandle {
    tx: Mutex<mpsc::Sender<Envelope>>,
}

impl ControlHandle {
    /// A handle and the receiver the runtime polls.
    pub fn channel() -> (ControlHandle, mpsc::Receiver<Envelope>) {
        let (tx, rx) = mpsc::channel();
        (ControlHandle { tx: Mutex::new(tx) }, rx)
    }

    /// Send `req` and wait up to `timeout` for the answer (503 when the runtime does not answer).
    pub fn call(&self, req: Request, timeout: Duration) -> Result<Reply, ControlError> {
        let (rtx, rrx) = mpsc::sync_channel(1);
        let sent = self
            .tx
            .lock()
            .map_err(|_| ControlError::new(500, "control channel poisoned"))?
            .send((req, rtx));
        if sent.is_err() {
            return Err(ControlError::new(503, "the NF's runtime has stopped"));
        }
        rrx.recv_timeout(timeout)
            .map_err(|_| ControlError::new(503, "the NF's runtime did not answer in time"))?
    }
}
