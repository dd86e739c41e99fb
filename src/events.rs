//! What flows out of the runner while a run goes on, and the cancel signal
//! that flows in. The runner and the agent loop emit [`RunEvent`]s; the
//! progress display and the results writer consume them. Nothing here prints.

use tokio::sync::{mpsc, watch};

use crate::run_folder::ResultRow;
use crate::task::TaskId;

/// What a running task is doing, for the progress display.
#[derive(Debug, Clone)]
pub(crate) enum Phase {
    Checkout,
    Setup,
    /// Waiting for the model's answer number `turn`.
    Model {
        turn: u32,
    },
    /// Running a command of answer number `turn`.
    Command {
        turn: u32,
        command: String,
    },
    Test,
}

#[derive(Debug, Clone)]
pub(crate) enum RunEvent {
    RunStarted {
        total: usize,
    },
    TaskStarted {
        task: TaskId,
        epoch: u32,
    },
    TaskPhase {
        task: TaskId,
        epoch: u32,
        phase: Phase,
    },
    TaskFinished {
        row: Box<ResultRow>,
    },
    /// Something the user should know that is not a task's outcome.
    Warning(String),
}

/// The sending side, cheap to clone into every task. Sending never fails the
/// sender: a consumer that is gone just misses events.
#[derive(Debug, Clone)]
pub(crate) struct EventSink {
    tx: mpsc::UnboundedSender<RunEvent>,
}

impl EventSink {
    pub(crate) fn channel() -> (EventSink, mpsc::UnboundedReceiver<RunEvent>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (EventSink { tx }, rx)
    }

    pub(crate) fn emit(&self, event: RunEvent) {
        let _ = self.tx.send(event);
    }

    pub(crate) fn phase(&self, task: &TaskId, epoch: u32, phase: Phase) {
        self.emit(RunEvent::TaskPhase {
            task: task.clone(),
            epoch,
            phase,
        });
    }
}

/// Set once, on Ctrl-C: running tasks end as `interrupted`, none start.
#[derive(Debug, Clone)]
pub(crate) struct Cancel {
    rx: watch::Receiver<bool>,
}

#[derive(Debug)]
pub(crate) struct CancelHandle {
    tx: watch::Sender<bool>,
}

impl Cancel {
    pub(crate) fn new() -> (CancelHandle, Cancel) {
        let (tx, rx) = watch::channel(false);
        (CancelHandle { tx }, Cancel { rx })
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        *self.rx.borrow()
    }

    /// Resolves once cancelled; never, if the handle is dropped uncancelled.
    pub(crate) async fn cancelled(&self) {
        let mut rx = self.rx.clone();
        if rx.wait_for(|cancelled| *cancelled).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

impl CancelHandle {
    pub(crate) fn cancel(&self) {
        self.tx.send_replace(true);
    }
}
