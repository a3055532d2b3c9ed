//! Progress on stderr: a live spinner with the output row count when stderr is a terminal, plain
//! time-stamped lines (one every few seconds while joining) otherwise, nothing with `--quiet`.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// How often a plain (non-terminal) progress line is printed while joining.
const PLAIN_INTERVAL: Duration = Duration::from_secs(5);

/// Reports what a long command is doing.
pub struct Progress {
    mode: Mode,
    start: Instant,
    /// The thread that reports live, and the channel whose closing stops it at once: a ticker
    /// that slept in steps and looked at a flag between them held every run that reported
    /// progress for up to a step (50 ms) at its end, while `finish` waited for it.
    ticker: Option<(Sender<()>, JoinHandle<()>)>,
    /// Input rows read so far and in all, for joins that read while they run.
    reading: Option<(Arc<AtomicU64>, u64)>,
}

enum Mode {
    Quiet,
    Plain,
    Terminal(ProgressBar),
}

impl Progress {
    /// Progress for a command; `quiet` turns it off.
    pub fn new(quiet: bool) -> Progress {
        let mode = if quiet {
            Mode::Quiet
        } else if std::io::stderr().is_terminal() {
            let bar = ProgressBar::new_spinner();
            bar.set_style(
                ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
                    .expect("a valid template"),
            );
            Mode::Terminal(bar)
        } else {
            Mode::Plain
        };
        Progress {
            mode,
            start: Instant::now(),
            ticker: None,
            reading: None,
        }
    }

    /// Reports a step.
    pub fn say(&self, message: &str) {
        match &self.mode {
            Mode::Quiet => {}
            Mode::Plain => say_plain(self.start.elapsed().as_secs_f64(), message),
            Mode::Terminal(bar) => bar.set_message(message.to_string()),
        }
    }

    /// A counter of output rows for the join to add to, reported live until [`Progress::finish`].
    pub fn output_counter(&self) -> Option<Arc<AtomicU64>> {
        if matches!(self.mode, Mode::Quiet) {
            return None;
        }
        Some(Arc::new(AtomicU64::new(0)))
    }

    /// A counter of input rows for a join that reads while it runs to add to, of `total` in
    /// all; reported with the output rows.
    pub fn read_counter(&mut self, total: u64) -> Option<Arc<AtomicU64>> {
        if matches!(self.mode, Mode::Quiet) {
            return None;
        }
        let counter = Arc::new(AtomicU64::new(0));
        self.reading = Some((Arc::clone(&counter), total));
        Some(counter)
    }

    /// Starts reporting `counter` (from [`Progress::output_counter`]), and the input rows read
    /// when a [`Progress::read_counter`] was made.
    pub fn watch(&mut self, counter: &Option<Arc<AtomicU64>>) {
        let Some(counter) = counter.clone() else {
            return;
        };
        let (stop, stopped) = mpsc::channel::<()>();
        let start = Instant::now();
        let (bar, interval) = match &self.mode {
            Mode::Terminal(bar) => {
                bar.enable_steady_tick(Duration::from_millis(120));
                (Some(bar.clone()), Duration::from_millis(250))
            }
            _ => (None, PLAIN_INTERVAL),
        };
        let reading = self.reading.clone();
        let handle = std::thread::spawn(move || {
            // Every interval until the sender is dropped (or sends).
            while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(interval) {
                let rows = counter.load(Ordering::Relaxed);
                let seconds = start.elapsed().as_secs_f64();
                let read = match &reading {
                    Some((read, total)) if read.load(Ordering::Relaxed) < *total => format!(
                        "read {} of {total} input rows, ",
                        read.load(Ordering::Relaxed)
                    ),
                    _ => String::new(),
                };
                let message = format!(
                    "joining: {read}{rows} output rows ({:.3e} rows/s)",
                    rows as f64 / seconds.max(1e-9)
                );
                match &bar {
                    Some(bar) => bar.set_message(message),
                    None => say_plain(seconds, &message),
                }
            }
        });
        self.ticker = Some((stop, handle));
    }

    /// Stops live reporting and clears the spinner.
    pub fn finish(&mut self) {
        if let Some((stop, handle)) = self.ticker.take() {
            drop(stop);
            let _ = handle.join();
        }
        if let Mode::Terminal(bar) = &self.mode {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

/// A step on standard error, timestamped; a closed standard error (`2>&1 | head`) is no reason to
/// stop the run, where `eprintln!` would panic.
fn say_plain(seconds: f64, message: &str) {
    let _ = writeln!(std::io::stderr(), "[{seconds:>7.1}s] {message}");
}
