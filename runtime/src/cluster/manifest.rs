//! The finished output's manifest, the facts every process must agree on, and moving a complete output into place.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use arrow::datatypes::SchemaRef;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use skewjoin_planner::exec_cluster::ClusterSpec;

use crate::cli::JoinArgs;
use crate::error::{Error, Result};
use crate::io::FileFormat;

/// The manifest of a finished cluster output.
#[derive(Debug, Serialize, Deserialize)]
pub struct Manifest {
    /// The format of every part.
    pub format: String,
    /// Output rows in all parts.
    pub rows: u64,
    /// The checksum of all parts together, as 16 hex digits.
    pub checksum: String,
    /// Every part, by worker.
    pub parts: Vec<ManifestPart>,
}

/// One part of a cluster output.
#[derive(Debug, Serialize, Deserialize)]
pub struct ManifestPart {
    /// The file, relative to the output directory.
    pub file: String,
    /// The worker that wrote it.
    pub worker: usize,
    /// Its rows.
    pub rows: u64,
    /// Their checksum, as 16 hex digits.
    pub checksum: String,
}

/// The manifest's file name in the output directory.
pub const MANIFEST: &str = "_manifest.json";

/// Everything that must agree between the processes of a run, by name, as each process shows it
/// to the others in the handshake: a process started on other files, another output, other
/// flags or another worker count would give a wrong or mixed result, so the run stops, naming
/// each field that differs.
pub(super) fn agreed_fields(
    args: &JoinArgs,
    spec: &ClusterSpec,
    partitions: usize,
    output: Option<&(PathBuf, FileFormat)>,
    (left, right): (&SchemaRef, &SchemaRef),
) -> Result<BTreeMap<String, String>> {
    let mut fields = BTreeMap::new();
    let mut put = |name: &str, value: String| {
        fields.insert(name.to_string(), value);
    };
    for (side, path, schema) in [("left", &args.left, left), ("right", &args.right, right)] {
        put(&format!("{side} input"), path.display().to_string());
        put(&format!("{side} input size"), file_size(path)?);
        put(&format!("{side} input content"), content_digest(path)?);
        put(&format!("{side} schema"), format!("{schema:?}"));
    }
    match output {
        Some((dir, format)) => {
            put("--output", dir.display().to_string());
            put("output format", format.to_string());
        }
        None => put("--output", "(none)".into()),
    }
    put("--processes", spec.processes().to_string());
    put("--workers per process", spec.threads.to_string());
    put("--partitions", partitions.to_string());
    put("--how", args.run.how.clone());
    put("--strategy", args.strategy.clone());
    put(
        "--bandwidth",
        args.cluster
            .bandwidth
            .map_or("(none)".into(), |bits| format!("{bits} bit/s")),
    );
    put(
        "key columns",
        format!("{:?} {:?} {:?}", args.on, args.left_on, args.right_on),
    );
    put(
        "tuning",
        format!(
            "hot {:?}, broadcast {:?}, leaf {:?}, fanout {:?}, statistics {:?}, virtual {:?}, \
             sample {:?}",
            args.hot_per_mille,
            args.broadcast_per_mille,
            args.leaf,
            args.fanout,
            args.statistics,
            args.run.virtual_per_partition,
            args.run.sample_fraction,
        ),
    );
    put("CSV dialect", format!("{:?}", args.csv.dialect()));
    put(
        "memory limits",
        format!(
            "broadcast {:?}, memory {:?}",
            args.broadcast_limit, args.memory_limit
        ),
    );
    Ok(fields)
}

fn file_size(path: &Path) -> Result<String> {
    std::fs::metadata(path)
        .map(|metadata| metadata.len().to_string())
        .map_err(|error| Error::Input(format!("{}: cannot read it: {error}", path.display())))
}

/// The bytes of each end of an input that go into [`content_digest`].
const DIGEST_END_BYTES: u64 = 64 * 1024;

/// A SHA-256 of the first and last 64 KiB of a file, where a Parquet file keeps its footer: files
/// copied between machines keep it, where they may not keep their modification times.
fn content_digest(path: &Path) -> Result<String> {
    let fail = |error: std::io::Error| {
        Error::Input(format!("{}: cannot read it: {error}", path.display()))
    };
    let mut file = std::fs::File::open(path).map_err(fail)?;
    let size = file.metadata().map_err(fail)?.len();
    let mut hasher = Sha256::new();
    let mut buffer = Vec::new();
    (&mut file)
        .take(DIGEST_END_BYTES)
        .read_to_end(&mut buffer)
        .map_err(fail)?;
    hasher.update(&buffer);
    if size > DIGEST_END_BYTES {
        buffer.clear();
        file.seek(SeekFrom::Start(
            size.saturating_sub(DIGEST_END_BYTES).max(DIGEST_END_BYTES),
        ))
        .map_err(fail)?;
        file.take(DIGEST_END_BYTES)
            .read_to_end(&mut buffer)
            .map_err(fail)?;
        hasher.update(&buffer);
    }
    Ok(hasher
        .finalize()
        .iter()
        .take(12)
        .map(|byte| format!("{byte:02x}"))
        .collect())
}

/// A hash of [`agreed_fields`], for the facts the processes compare once more as they plan.
pub(super) fn fingerprint(fields: &BTreeMap<String, String>) -> u64 {
    let mut hasher = DefaultHasher::new();
    fields.hash(&mut hasher);
    hasher.finish()
}

/// Where a cluster output is written until it is complete: a hidden directory beside the target
/// named by the run, the same on every process (process 0's token from the handshake), so that
/// processes sharing a file system write into one directory, and a failed run never touches the
/// previous output.
pub(super) fn staged_dir(target: &Path, run: &str) -> PathBuf {
    let name = target.file_name().map_or_else(
        || "output".to_string(),
        |name| name.to_string_lossy().into_owned(),
    );
    target.with_file_name(format!(".{name}.{}.partial", &run[..run.len().min(16)]))
}

/// The file process 0 keeps in the staged directory while the run goes on: a process that
/// finds it at the end shares process 0's file system and leaves the directory to it.
pub(super) const PROCESS_0_MARK: &str = ".process-0";

/// Whether `name` is a file that a cluster output holds: an existing output directory holding
/// only these may be replaced by a new run.
fn is_output_file(name: &str) -> bool {
    name == MANIFEST || name.starts_with("part-") || name.starts_with(".part-")
}

/// Refuses an existing `--output` directory that holds anything but a cluster output's files:
/// replacing it would lose them.
pub(super) fn check_replaceable(dir: &Path) -> Result<()> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !is_output_file(&name) {
            return Err(Error::Usage(format!(
                "--output {} exists and holds {name:?}, which is not part of a skewjoin output: \
                 a cluster run replaces the whole directory; give a new path",
                dir.display()
            )));
        }
    }
    Ok(())
}

/// Moves the complete output `staged` onto `target`, replacing an earlier output there (its
/// files are removed once the new one is in place; see [`check_replaceable`]).
pub(super) fn put_in_place(staged: &Path, target: &Path) -> Result<()> {
    let fail = |error: std::io::Error| {
        Error::Io(format!(
            "--output {}: cannot move the finished output {} into place: {error}",
            target.display(),
            staged.display()
        ))
    };
    if !target.exists() {
        return std::fs::rename(staged, target).map_err(fail);
    }
    let old = staged.with_extension("old");
    std::fs::rename(target, &old).map_err(fail)?;
    if let Err(error) = std::fs::rename(staged, target) {
        let _ = std::fs::rename(&old, target);
        return Err(fail(error));
    }
    if let Ok(entries) = std::fs::read_dir(&old) {
        for entry in entries.flatten() {
            if is_output_file(&entry.file_name().to_string_lossy()) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    let _ = std::fs::remove_dir(&old);
    Ok(())
}
