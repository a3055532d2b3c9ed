//! Cluster mode: `skewjoin join ... --processes N --process I --hostfile FILE` runs process `I` of
//! a timely cluster of `N` processes (the hostfile has one `host:port` per process, as timely's
//! `-h`), and `skewjoin cluster --processes N -- join ...` starts `N` such processes on this
//! machine, on free loopback ports, with a secret of the run. The connections are opened and
//! authenticated here (`handshake`), where the processes also compare everything that must
//! agree (`agreed_fields`), and only then handed to timely.
//!
//! Each process reads only its share of each input (row groups of Parquet, record batches of
//! Arrow IPC, byte ranges of CSV; see [`crate::io::read_table_share`]), streaming it into the join
//! a batch at a time ([`crate::io::batches::InputFile::open_share`]), and its rows stay home on its
//! own workers. The processes agree on cluster-wide row counts before anything is planned,
//! so every one runs the same plan. Output is written as one part file per worker,
//! `DIR/part-WWWWW.EXT`, and process 0 writes `DIR/_manifest.json` (every part with its row count
//! and checksum, and the totals) once all parts are complete; the parts are written in a
//! directory of the run beside `DIR`, moved into place whole when complete (`staged_dir`), so a
//! failed run leaves an earlier output as it was. Without `--output` only the row count and
//! checksum are computed, and rows travel as a row number and a hash; with it, each row's contents
//! travel with it (Arrow's row format, encoded a batch at a time as it is read), because the
//! worker that joins a pair may be on a process that read neither row.
//! `--metrics` is written by process 0 and describes the whole cluster; `--process-metrics` is
//! written by every process and describes that process (`ProcessMetrics`).
//!
//! Faults: a process that cannot connect to all others within `--connect-timeout` seconds exits
//! with code 5; a process that dies during the join makes timely's connections to it fail, and
//! the others exit with code 5 and remove the part files they wrote.

mod config;
mod handshake;
mod join;
mod launch;
mod manifest;
mod rows;
mod sinks;
mod watchdog;

pub use config::{read_hostfile, SECRET_ENV};
pub use join::join;
pub use launch::launch;
pub use manifest::{Manifest, ManifestPart, MANIFEST};
pub use sinks::WorkerSummary;
