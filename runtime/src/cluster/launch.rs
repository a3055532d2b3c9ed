//! `skewjoin cluster`: starting N processes on this machine and stopping them together.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command as Process};
use std::time::{Duration, Instant};

use crate::cli::LaunchArgs;
use crate::error::{Error, Result};

use super::config::SECRET_ENV;
use super::handshake;

/// Sends SIGTERM to `child`, which removes its unfinished files and exits.
fn terminate(child: &Child) {
    if let Ok(pid) = libc::pid_t::try_from(child.id()) {
        // SAFETY: kill on the pid of a child not yet waited for, so not reused.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
    }
}

/// How long stopped children get to clean up before they are killed outright.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// Stops every running child with SIGTERM and waits for them; one still running after
/// [`STOP_GRACE`] is killed.
fn stop_children(children: &mut [Option<Child>]) {
    for child in children.iter().flatten() {
        terminate(child);
    }
    let start = Instant::now();
    while children.iter().any(Option::is_some) {
        for slot in children.iter_mut() {
            let Some(child) = slot else { continue };
            match child.try_wait() {
                Ok(None) if start.elapsed() < STOP_GRACE => {}
                Ok(None) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    *slot = None;
                }
                _ => *slot = None,
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// "signal 9 (SIGKILL)" for a status that ended by a signal.
fn describe_signal(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    let Some(signal) = status.signal() else {
        return "a signal".into();
    };
    let name = match signal {
        libc::SIGKILL => " (SIGKILL)",
        libc::SIGTERM => " (SIGTERM)",
        libc::SIGINT => " (SIGINT)",
        libc::SIGSEGV => " (SIGSEGV)",
        libc::SIGABRT => " (SIGABRT)",
        libc::SIGBUS => " (SIGBUS)",
        libc::SIGPIPE => " (SIGPIPE)",
        _ => "",
    };
    format!("signal {signal}{name}")
}

/// The `--output` of the join arguments `command` (starting with `join`), if they parse.
fn output_of(command: &[String]) -> Option<PathBuf> {
    let arguments = std::iter::once("skewjoin").chain(command.iter().map(String::as_str));
    match <crate::cli::Cli as clap::Parser>::try_parse_from(arguments)
        .ok()?
        .command
    {
        crate::cli::Command::Join(join) => join.output,
        _ => None,
    }
}

/// `skewjoin cluster --processes N -- join ...`: starts N processes on free loopback ports,
/// waits for them, and exits with the first failure's code (stopping the others) or 0.
pub fn launch(args: LaunchArgs) -> Result<()> {
    if args.processes == 0 {
        return Err(Error::Usage("--processes must be at least 1".into()));
    }
    if args.command.first().map(String::as_str) != Some("join") {
        return Err(Error::Usage(
            "skewjoin cluster runs a join: `skewjoin cluster --processes 2 -- join LEFT RIGHT --on KEY`"
                .into(),
        ));
    }
    for flag in [
        "--processes",
        "-n",
        "--process",
        "--hostfile",
        "--cluster-secret-file",
        "--insecure",
    ] {
        if args
            .command
            .iter()
            .any(|arg| arg == flag || arg.starts_with(&format!("{flag}=")))
        {
            return Err(Error::Usage(format!(
                "leave {flag} out of the join arguments: skewjoin cluster sets it for each process"
            )));
        }
    }
    // Its processes share this file system: one --process-metrics path would be overwritten by
    // each in turn.
    if let Some(position) = args
        .command
        .iter()
        .position(|arg| arg == "--process-metrics" || arg.starts_with("--process-metrics="))
    {
        let value = match args.command[position].split_once('=') {
            Some((_, value)) => Some(value),
            None => args.command.get(position + 1).map(String::as_str),
        };
        if !value.is_some_and(|value| value.contains("{process}")) {
            return Err(Error::Usage(
                "--process-metrics: every process of `skewjoin cluster` writes its own file on \
                 this machine; put {process} in the path (e.g. p{process}.json)"
                    .into(),
            ));
        }
    }
    let dir = tempfile::TempDir::new()
        .map_err(|error| Error::Io(format!("cannot create a temporary directory: {error}")))?;
    let hostfile = dir.path().join("hostfile");
    // Ports free now; the processes bind them a moment later.
    let listeners: Vec<TcpListener> = (0..args.processes)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<std::io::Result<_>>()
        .map_err(|error| Error::Io(format!("cannot find a free loopback port: {error}")))?;
    let addresses: Vec<String> = listeners
        .iter()
        .map(|listener| listener.local_addr().map(|a| a.to_string()))
        .collect::<std::io::Result<_>>()
        .map_err(|error| Error::Io(format!("cannot find a free loopback port: {error}")))?;
    drop(listeners);
    std::fs::write(&hostfile, addresses.join("\n") + "\n")
        .map_err(|error| Error::Io(format!("{}: cannot write: {error}", hostfile.display())))?;
    // A secret of this run only, in the children's environment: not on their command lines,
    // which anyone on the machine can read.
    let secret = handshake::random_hex(32)
        .map_err(|error| Error::Io(format!("cannot make a cluster secret: {error}")))?;
    let exe = std::env::current_exe()
        .map_err(|error| Error::Io(format!("cannot find the skewjoin executable: {error}")))?;
    // An output directory this run creates: each process removes it on failure if it created it
    // and it is empty by then, but another process's part may still have been in it; once every
    // process has stopped, it goes if it is empty.
    let new_output_dir = output_of(&args.command).filter(|dir| !dir.exists());
    // SIGTERM or SIGINT to this process alone (as a supervisor sends it) stops the children too.
    crate::interrupt::forward_to_children();
    let mut children: Vec<Option<Child>> = Vec::new();
    for process in 0..args.processes {
        let child = Process::new(&exe)
            .args(&args.command)
            .arg("--processes")
            .arg(args.processes.to_string())
            .arg("--process")
            .arg(process.to_string())
            .arg("--hostfile")
            .arg(&hostfile)
            .env(SECRET_ENV, &secret)
            .spawn()
            .map_err(|error| Error::Io(format!("cannot start process {process}: {error}")))?;
        children.push(Some(child));
    }
    let mut failure: Option<(usize, i32)> = None;
    let secondary = Error::Cluster(String::new()).exit_code();
    while children.iter().any(Option::is_some) {
        if crate::interrupt::interrupted() {
            stop_children(&mut children);
            if let Some(dir) = &new_output_dir {
                let _ = std::fs::remove_dir(dir);
            }
            eprintln!("\nskewjoin cluster: interrupted; stopped every process");
            std::process::exit(crate::interrupt::INTERRUPTED_EXIT_CODE);
        }
        for (process, slot) in children.iter_mut().enumerate() {
            let Some(child) = slot else { continue };
            match child.try_wait() {
                Ok(Some(status)) => {
                    *slot = None;
                    // A process that lost its peers (a cluster failure) is reported only if no
                    // process failed for a reason of its own, which is the cause.
                    let cause = failure.is_none_or(|(_, code)| code == secondary);
                    if !status.success() && cause {
                        let code = match status.code() {
                            Some(code) => code,
                            None => {
                                // Killed by a signal: it could not say why, so it is the
                                // cluster's failure.
                                eprintln!(
                                    "skewjoin cluster: process {process} was killed by {}",
                                    describe_signal(status)
                                );
                                secondary
                            }
                        };
                        failure = Some((process, code));
                    }
                }
                Ok(None) => {}
                Err(error) => {
                    return Err(Error::Io(format!(
                        "cannot wait for process {process}: {error}"
                    )))
                }
            }
        }
        if failure.is_some() {
            // The others would wait for the failed one until their own timeouts; stop them now,
            // with SIGTERM so they remove their unfinished files.
            for child in children.iter_mut().flatten() {
                terminate(child);
            }
            // One that had already failed for a reason of its own, unseen when its peer's lost
            // connection was, is the cause: a code other than the secondary one and than the
            // one the stop itself gives.
            for (process, slot) in children.iter_mut().enumerate() {
                let Some(child) = slot else { continue };
                let Ok(status) = child.wait() else { continue };
                let own = status.code().filter(|&code| {
                    code != 0
                        && code != secondary
                        && code != crate::interrupt::INTERRUPTED_EXIT_CODE
                });
                if let (Some(code), Some((_, found))) = (own, failure) {
                    if found == secondary {
                        failure = Some((process, code));
                    }
                }
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    match failure {
        None => Ok(()),
        Some((process, code)) => {
            if let Some(dir) = &new_output_dir {
                let _ = std::fs::remove_dir(dir);
            }
            eprintln!(
                "skewjoin cluster: process {process} failed (exit code {code}); stopped the others"
            );
            std::process::exit(code)
        }
    }
}
