//! The threads plugin calls run on, off the thread that serves the front door.
//!
//! A call can hold its thread in a system call no deadline interrupts: opening a FIFO waits
//! for a writer, and WASI file operations run on the calling thread. On the front door's
//! thread that would stop everything else, timers and pings included. So each call runs on a
//! worker, and its caller waits for the answer under the deadline. A worker whose call overran
//! is left behind: it ends when its system call returns (or with the process), and a new worker
//! takes the next call. Idle workers are kept, since handing a job to a waiting thread costs
//! far less than starting one.

use std::future::Future;
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex, Weak};

type Job = Box<dyn FnOnce() + Send>;

/// A pool of worker threads, each running one job at a time. Clones share the pool; idle
/// workers end when the last clone is dropped.
#[derive(Clone, Default)]
pub(crate) struct Workers {
    idle: Arc<Mutex<Vec<Sender<Job>>>>,
}

impl Workers {
    /// Runs `job` on an idle worker, or on a new one when none is idle. Fails only if no
    /// thread can be started.
    pub(crate) fn run(&self, job: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
        let mut job: Job = Box::new(job);
        loop {
            let Some(worker) = self.idle.lock().unwrap().pop() else {
                break;
            };
            match worker.send(job) {
                Ok(()) => return Ok(()),
                // Its thread ended (a job panicked): try the next.
                Err(mpsc::SendError(back)) => job = back,
            }
        }
        let idle = Arc::downgrade(&self.idle);
        std::thread::Builder::new()
            .name("cordon-call".into())
            .spawn(move || serve(job, &idle))?;
        Ok(())
    }
}

thread_local! {
    /// Each worker's own async runtime: a call's timers and wake-ups stay on its thread instead
    /// of crossing to the front door's runtime and back.
    static RUNTIME: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("cannot start a worker's async runtime");
}

/// Runs `future` to completion on this worker's runtime.
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    RUNTIME.with(|runtime| runtime.block_on(future))
}

/// A worker's life: run the job, wait in the idle list for the next, end with the pool.
fn serve(mut job: Job, idle: &Weak<Mutex<Vec<Sender<Job>>>>) {
    loop {
        job();
        let Some(idle) = idle.upgrade() else {
            return;
        };
        // A channel per wait: the pool holds its only sender, so dropping the pool ends the
        // wait.
        let (sender, next) = mpsc::channel();
        idle.lock().unwrap().push(sender);
        drop(idle);
        match next.recv() {
            Ok(next) => job = next,
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_stuck_job_does_not_hold_up_the_next_and_idle_workers_are_reused() {
        let workers = Workers::default();
        let (unblock, stuck) = mpsc::channel::<()>();
        workers
            .run(move || {
                let _ = stuck.recv();
            })
            .unwrap();
        let (done, answers) = mpsc::channel();
        let mut ids = Vec::new();
        for _ in 0..3 {
            let done = done.clone();
            workers
                .run(move || done.send(std::thread::current().id()).unwrap())
                .unwrap();
            ids.push(answers.recv_timeout(Duration::from_secs(10)).unwrap());
            // The worker is idle again once it has put itself back in the list.
            while workers.idle.lock().unwrap().is_empty() {
                std::thread::yield_now();
            }
        }
        assert!(
            ids.iter().all(|id| *id == ids[0]),
            "one worker served all three"
        );
        unblock.send(()).unwrap();
    }
}
