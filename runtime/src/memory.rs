//! The broadcast budget's default, and the key columns the skew check keeps, from the machine's
//! available memory.
//!
//! The planner does no IO and takes the budget as a row count; this module measures the memory it
//! is derived from (`MemAvailable` in `/proc/meminfo` on Linux, a fixed fallback elsewhere) and
//! applies the planner's rule, [`broadcast_limit_for_memory`].

use serde::Serialize;
use skewjoin_planner::choose::broadcast_limit_for_memory;

/// The memory assumed when it cannot be read (not Linux, or no `/proc`): 4 GiB, a small
/// machine's, so that the default errs towards shuffling.
pub const FALLBACK_AVAILABLE_BYTES: u64 = 4 << 30;

/// The broadcast budget a run plans with, and where it came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BroadcastBudget {
    /// The most rows `auto` and AM-Join copy to every worker.
    pub rows: u64,
    /// Where the figure came from, in words.
    pub source: String,
}

/// The budget for `workers` workers: `--broadcast-limit` when given, otherwise derived from
/// `--memory-limit` when given, otherwise from the available memory.
pub fn broadcast_budget(
    flag: Option<u64>,
    memory_limit: Option<u64>,
    workers: usize,
) -> BroadcastBudget {
    if let Some(rows) = flag {
        return BroadcastBudget {
            rows,
            source: "--broadcast-limit".into(),
        };
    }
    if let Some(bytes) = memory_limit {
        return budget_for(bytes, "given by --memory-limit", workers);
    }
    let (bytes, measured) = match available_bytes() {
        Some(bytes) => (bytes, "available"),
        None => (
            FALLBACK_AVAILABLE_BYTES,
            "assumed (MemAvailable unreadable)",
        ),
    };
    budget_for(bytes, measured, workers)
}

fn budget_for(bytes: u64, measured: &str, workers: usize) -> BroadcastBudget {
    BroadcastBudget {
        rows: broadcast_limit_for_memory(bytes, workers),
        source: format!(
            "a quarter of {:.1} GiB {measured}, one {}-byte row per worker",
            bytes as f64 / (1u64 << 30) as f64,
            skewjoin_planner::choose::INDEXED_ROW_BYTES
        ),
    }
}

/// The most bytes of decoded key columns `auto`'s skew check keeps for the join, per input (see
/// `io/kept_keys.rs`): a sixteenth of the memory the run plans with (`--memory-limit`, else
/// what is available), at most 256 MiB (the keys of 32 Mi rows of 64-bit keys). The join then
/// holds about three times as much of each row, so this is a small share of its memory.
pub fn kept_keys_bytes(memory_limit: Option<u64>) -> u64 {
    let memory = memory_limit
        .or_else(available_bytes)
        .unwrap_or(FALLBACK_AVAILABLE_BYTES);
    (memory / 16).min(256 << 20)
}

/// A memory size: bytes, or a number with a binary suffix `K`, `M`, `G` or `T` (`KiB`, `MB`...
/// are read alike, as powers of 1024), e.g. `512M`, `8G`, `1.5G`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let upper = trimmed.to_ascii_uppercase();
    let digits_end = upper
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(upper.len());
    let (number, unit) = upper.split_at(digits_end);
    let shift = match unit.trim().trim_end_matches("IB").trim_end_matches('B') {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => {
            return Err(format!(
                "{text:?} is not a size; write e.g. 8G, 512M or 1073741824"
            ))
        }
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a size; write e.g. 8G, 512M or 1073741824"))?;
    let bytes = value * (1u64 << shift) as f64;
    if !(1.0..=u64::MAX as f64).contains(&bytes) {
        return Err(format!("{text:?} is not a usable memory size"));
    }
    Ok(bytes as u64)
}

/// `MemAvailable` from `/proc/meminfo`, in bytes; `None` where it cannot be read.
pub fn available_bytes() -> Option<u64> {
    parse_mem_available(&std::fs::read_to_string("/proc/meminfo").ok()?)
}

/// The `MemAvailable:` line of a `/proc/meminfo` text (in kB there), in bytes.
fn parse_mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo
        .lines()
        .find_map(|line| line.strip_prefix("MemAvailable:"))?;
    let mut words = line.split_whitespace();
    let value: u64 = words.next()?.parse().ok()?;
    let unit = match words.next() {
        Some("kB") => 1024,
        None => 1,
        Some(_) => return None,
    };
    value.checked_mul(unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_available_is_read_in_bytes() {
        let text = "MemTotal:       16384000 kB\nMemFree:  100 kB\nMemAvailable:    8388608 kB\n";
        assert_eq!(parse_mem_available(text), Some(8 << 30));
        assert_eq!(parse_mem_available("MemTotal: 5 kB\n"), None);
        assert_eq!(parse_mem_available("MemAvailable: lots kB\n"), None);
        assert_eq!(parse_mem_available("MemAvailable: 5 MB\n"), None);
    }

    #[test]
    fn kept_keys_are_a_sixteenth_of_the_memory_limit_up_to_256_mib() {
        assert_eq!(kept_keys_bytes(Some(1 << 30)), 64 << 20);
        assert_eq!(kept_keys_bytes(Some(4 << 30)), 256 << 20);
        assert_eq!(kept_keys_bytes(Some(64 << 30)), 256 << 20);
        assert!(kept_keys_bytes(None) <= 256 << 20);
    }

    #[test]
    fn the_flag_wins_and_the_default_follows_memory() {
        let given = broadcast_budget(Some(123), Some(1 << 30), 4);
        assert_eq!(given.rows, 123);
        assert_eq!(given.source, "--broadcast-limit");
        // 8 GiB and 2 workers: 2 GiB for two copies of 128-byte rows.
        let derived = budget_for(8 << 30, "available", 2);
        assert_eq!(derived.rows, 8 << 20);
        assert!(
            derived.source.contains("8.0 GiB available"),
            "{}",
            derived.source
        );
        // More workers, more copies, fewer rows.
        assert_eq!(budget_for(8 << 30, "available", 8).rows, 2 << 20);
        // Whatever this machine has, the default is a number derived from it.
        let here = broadcast_budget(None, None, 2);
        assert!(here.source.contains("GiB"), "{}", here.source);
        // --memory-limit replaces the measured memory.
        let limited = broadcast_budget(None, Some(8 << 30), 2);
        assert_eq!(limited.rows, 8 << 20);
        assert!(
            limited.source.contains("--memory-limit"),
            "{}",
            limited.source
        );
    }

    #[test]
    fn sizes_read_with_binary_suffixes() {
        assert_eq!(parse_size("1073741824"), Ok(1 << 30));
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("8g"), Ok(8 << 30));
        assert_eq!(parse_size("8GiB"), Ok(8 << 30));
        assert_eq!(parse_size("1.5G"), Ok(3 << 29));
        assert_eq!(parse_size("2 TB"), Ok(2 << 40));
        for bad in ["", "G", "8X", "-1G", "0", "1.2.3M"] {
            assert!(parse_size(bad).is_err(), "{bad:?}");
        }
    }
}
