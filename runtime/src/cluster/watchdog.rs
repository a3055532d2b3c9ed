//! Stopping a process whose peer failed, instead of leaving it waiting.

use crate::error::Error;

/// Timely's network threads panic when a peer goes away ("timely communication error"), and the
/// workers after them. A worker busy in a long operator would notice only when it next looks at
/// the network, so the first such panic stops this process at once, removing every file of this
/// run it wrote (exit code 5). The workers' own panics after it print nothing; every other panic
/// prints as usual and stops the process too (exit code 1), but those `fenced` turns into input
/// errors.
pub(super) fn stop_on_peer_failure(process: usize) {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        // "Clean shutdown followed by data": a peer broke the protocol, or its bytes were cut.
        if message.contains("timely communication error")
            || message.contains("Clean shutdown followed by data")
        {
            crate::interrupt::abort(
                Error::Cluster(String::new()).exit_code(),
                &format!(
                    "process {process}: lost the connection to another process of the cluster \
                     ({message}); it stopped or crashed, see its messages. This process stops \
                     too and removed the files it wrote; start every process again"
                ),
            );
        }
        let follows_another = message.contains("MergeQueue") || message.contains("poison");
        if !follows_another {
            default(info);
        }
        // Any other panic of a worker is a bug; the other workers, and every other process,
        // would wait for its records forever: stop now, so that they see this one go.
        if !follows_another && !crate::io::in_fenced() {
            crate::interrupt::abort(
                Error::Internal(String::new()).exit_code(),
                &format!(
                    "process {process}: a thread failed on an internal error (above); this \
                     process stops and removed the files it wrote. Please report it"
                ),
            );
        }
    }));
}
