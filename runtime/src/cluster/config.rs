//! The cluster's secret and its processes' addresses, from the flags, the environment and the hostfile.

use std::path::Path;

use crate::cli::ClusterArgs;
use crate::error::{Error, Result};

/// The environment variable that may hold the cluster secret instead of a file; `skewjoin
/// cluster` passes its children the secret it made this way, not on their command lines.
pub const SECRET_ENV: &str = "SKEWJOIN_CLUSTER_SECRET";

/// The fewest bytes a secret may have.
const SECRET_MIN_BYTES: usize = 16;

/// How to make a secret, for messages.
const MAKE_A_SECRET: &str = "make one with `(umask 077; head -c 32 /dev/urandom | base64 > \
                             cluster.secret)`, copy it to every machine and give every process \
                             --cluster-secret-file cluster.secret";

/// The cluster's shared secret: `--cluster-secret-file`, else SKEWJOIN_CLUSTER_SECRET, else none
/// with `--insecure` (an empty key); without any, cluster mode refuses to start.
pub(super) fn cluster_secret(cluster: &ClusterArgs) -> Result<Vec<u8>> {
    let secret = if let Some(path) = &cluster.cluster_secret_file {
        let shown = path.display();
        let metadata = std::fs::metadata(path).map_err(|error| {
            Error::Usage(format!(
                "--cluster-secret-file {shown}: cannot read it: {error}; {MAKE_A_SECRET}"
            ))
        })?;
        {
            use std::os::unix::fs::PermissionsExt;
            if metadata.permissions().mode() & 0o007 != 0 {
                return Err(Error::Usage(format!(
                    "--cluster-secret-file {shown}: anyone on this machine can read it; make it \
                     private with `chmod 600 {shown}`"
                )));
            }
        }
        let bytes = std::fs::read(path).map_err(|error| {
            Error::Usage(format!(
                "--cluster-secret-file {shown}: cannot read it: {error}; {MAKE_A_SECRET}"
            ))
        })?;
        let text_end = bytes
            .iter()
            .rposition(|byte| !byte.is_ascii_whitespace())
            .map_or(0, |end| end + 1);
        let secret = bytes[..text_end].to_vec();
        if secret.len() < SECRET_MIN_BYTES {
            return Err(Error::Usage(format!(
                "--cluster-secret-file {shown} holds {} bytes; a secret needs at least \
                 {SECRET_MIN_BYTES}: {MAKE_A_SECRET}",
                secret.len()
            )));
        }
        secret
    } else if let Some(value) = std::env::var_os(SECRET_ENV) {
        let secret = value.into_encoded_bytes();
        if secret.len() < SECRET_MIN_BYTES {
            return Err(Error::Usage(format!(
                "{SECRET_ENV} holds {} bytes; a secret needs at least {SECRET_MIN_BYTES}: \
                 {MAKE_A_SECRET}",
                secret.len()
            )));
        }
        secret
    } else if cluster.insecure {
        eprintln!(
            "skewjoin: warning: --insecure: any program that can reach this process's port can \
             join the cluster or feed it data"
        );
        Vec::new()
    } else {
        return Err(Error::Usage(format!(
            "cluster mode needs a shared secret, so that only your processes can join the \
             cluster: {MAKE_A_SECRET} (or set {SECRET_ENV}); --insecure runs without one, on a \
             trusted private network only"
        )));
    };
    Ok(secret)
}

impl ClusterArgs {
    /// Whether these flags ask for more than one process.
    pub fn is_cluster(&self) -> bool {
        self.processes.is_some_and(|n| n > 1)
    }
}

/// The addresses of a hostfile: one `host:port` per line, blank lines and `#` comments ignored;
/// there must be exactly `processes` of them.
pub fn read_hostfile(path: &Path, processes: usize) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(path).map_err(|error| {
        Error::Usage(format!(
            "--hostfile {}: cannot read it: {error}; give a file with one host:port per process",
            path.display()
        ))
    })?;
    let mut addresses = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let port = line.rsplit_once(':').map(|(_, port)| port.parse::<u16>());
        if !matches!(port, Some(Ok(_))) {
            return Err(Error::Usage(format!(
                "--hostfile {}: line {}: {line:?} is not host:port (e.g. 10.0.0.5:2101)",
                path.display(),
                number + 1
            )));
        }
        addresses.push(line.to_string());
    }
    if addresses.len() != processes {
        return Err(Error::Usage(format!(
            "--hostfile {} lists {} addresses but --processes is {processes}; give one host:port \
             per process",
            path.display(),
            addresses.len()
        )));
    }
    Ok(addresses)
}
