//! What `auto` knows of a cluster's network and machines: the link rate a user gives with
//! `--bandwidth`, the cores this process may use, and the bytes a record takes on the wire.
//!
//! The planner does no IO and weighs a link as numbers ([`Link`]); this module reads them.
//! Without `--bandwidth` the link is not weighed: on links of 1.25 Gbit/s a core (10 Gbit/s for
//! 8 cores), as the emulated machines of benches/cluster have, it was never the bottleneck.

use arrow::datatypes::{DataType, Schema};
use skewjoin_planner::work_costs::{Link, COUNTED_RECORD_BYTES};

/// Parses a link rate in bits per second: `100mbit`, `1gbit`, `2.5g`, `1e9`, `100M`
/// (k, m, g and t are powers of 1,000; a trailing `bit` or `bit/s` is allowed, not `bps`, which
/// `tc` reads as bytes).
pub fn parse_bandwidth(text: &str) -> Result<u64, String> {
    let lower = text.trim().to_ascii_lowercase();
    let number = ["bit/s", "bit"]
        .iter()
        .find_map(|unit| lower.strip_suffix(unit))
        .unwrap_or(&lower);
    let (number, scale) = match number.chars().last() {
        Some('k') => (&number[..number.len() - 1], 1e3),
        Some('m') => (&number[..number.len() - 1], 1e6),
        Some('g') => (&number[..number.len() - 1], 1e9),
        Some('t') => (&number[..number.len() - 1], 1e12),
        _ => (number, 1.0),
    };
    let bits = number.trim().parse::<f64>().ok().map(|value| value * scale);
    match bits {
        Some(bits) if bits.is_finite() && bits >= 1.0 && bits <= u64::MAX as f64 => Ok(bits as u64),
        _ => Err(format!(
            "'{text}' is not a link rate; give bits per second in each direction, such as \
             100mbit, 1gbit, 10gbit or 1e9"
        )),
    }
}

/// The cores this process may use, in thousandths: a cpu cgroup's quota where one is set (cgroup
/// v2 `cpu.max`, v1 `cpu.cfs_quota_us`), else the cores it may run on.
pub fn process_cores_milli() -> u64 {
    let cores = std::thread::available_parallelism().map_or(1, |cores| cores.get() as u64) * 1000;
    cgroup_quota_milli().map_or(cores, |quota| quota.min(cores))
}

/// The cpu cgroup quota of this process, in thousandths of a core, if one is set and readable:
/// the smallest of its cgroup's and every parent's (a systemd slice's quota caps what is in it).
fn cgroup_quota_milli() -> Option<u64> {
    let membership = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mut smallest: Option<u64> = None;
    for line in membership.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let Some(hierarchy) = Hierarchy::of(controllers) else {
            continue;
        };
        let mut dir = std::path::Path::new(path);
        loop {
            let name = dir.to_string_lossy();
            let name = if name == "/" { "" } else { name.as_ref() };
            if let Some(quota) = hierarchy.quota_milli(name) {
                smallest = Some(smallest.map_or(quota, |least| least.min(quota)));
            }
            match dir.parent() {
                Some(parent) => dir = parent,
                None => break,
            }
        }
    }
    smallest
}

/// Where a cgroup's cpu quota is read.
enum Hierarchy {
    /// cgroup v2, mounted at /sys/fs/cgroup: `cpu.max`.
    V2,
    /// cgroup v1's cpu controller, mounted at this path: `cpu.cfs_quota_us` and its period.
    V1(String),
}

impl Hierarchy {
    /// The hierarchy of a `/proc/self/cgroup` line's controllers, if it holds the cpu quota.
    fn of(controllers: &str) -> Option<Hierarchy> {
        if controllers.is_empty() {
            return Some(Hierarchy::V2);
        }
        if !controllers.split(',').any(|name| name == "cpu") {
            return None;
        }
        ["cpu", "cpu,cpuacct", "cpuacct,cpu"]
            .iter()
            .map(|mount| format!("/sys/fs/cgroup/{mount}"))
            .find(|mount| {
                std::path::Path::new(mount)
                    .join("cpu.cfs_quota_us")
                    .exists()
            })
            .map(Hierarchy::V1)
    }

    /// The quota of the cgroup at `dir` ("" for the root, else "/a/b"), if one is set.
    fn quota_milli(&self, dir: &str) -> Option<u64> {
        let read = |path: String| std::fs::read_to_string(path).ok();
        match self {
            Hierarchy::V2 => quota_of_v2(&read(format!("/sys/fs/cgroup{dir}/cpu.max"))?),
            Hierarchy::V1(mount) => quota_of_v1(
                &read(format!("{mount}{dir}/cpu.cfs_quota_us"))?,
                &read(format!("{mount}{dir}/cpu.cfs_period_us"))?,
            ),
        }
    }
}

/// The quota in cgroup v1's `cpu.cfs_quota_us` and `cpu.cfs_period_us`, in thousandths of a
/// core; `None` for -1, no quota.
fn quota_of_v1(quota: &str, period: &str) -> Option<u64> {
    let quota: i64 = quota.trim().parse().ok()?;
    let period: i64 = period.trim().parse().ok()?;
    (quota > 0 && period > 0).then(|| ((quota as u64).saturating_mul(1000) / period as u64).max(1))
}

/// The quota in a cgroup v2 `cpu.max`, in thousandths of a core; `None` for "max".
fn quota_of_v2(text: &str) -> Option<u64> {
    let mut fields = text.split_whitespace();
    let quota: u64 = fields.next()?.parse().ok()?;
    let period: u64 = fields.next()?.parse().ok()?;
    (period > 0).then(|| (quota.saturating_mul(1000) / period).max(1))
}

/// Bytes a record of these sides takes on the wire: its key, hash and framing, and with the
/// output written its whole row in Arrow's row format, estimated from the columns' types (a
/// fixed-width value and its null byte; a string or binary value up to 32 bytes, as 34 bytes).
pub fn record_bytes(left: &Schema, right: &Schema, written: bool) -> u64 {
    if !written {
        return COUNTED_RECORD_BYTES;
    }
    let row = |schema: &Schema| -> u64 {
        schema
            .fields()
            .iter()
            .map(|field| match field.data_type() {
                DataType::Boolean | DataType::Null => 2,
                DataType::Utf8
                | DataType::LargeUtf8
                | DataType::Utf8View
                | DataType::Binary
                | DataType::LargeBinary
                | DataType::BinaryView => 34,
                data_type => data_type
                    .primitive_width()
                    .map_or(64, |width| width as u64 + 1),
            })
            .sum()
    };
    COUNTED_RECORD_BYTES + (row(left) + row(right)) / 2
}

/// The link `auto` weighs for a cluster of `processes` processes of `workers` workers, at
/// `bits_per_second`, moving records of `record_bytes`.
pub fn link(bits_per_second: u64, record_bytes: u64, processes: usize, workers: usize) -> Link {
    Link {
        bits_per_second,
        record_bytes,
        processes: processes as u64,
        workers: workers as u64,
        cores_milli: process_cores_milli(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::Field;

    #[test]
    fn link_rates_parse_in_the_forms_users_write_them() {
        assert_eq!(parse_bandwidth("100mbit"), Ok(100_000_000));
        assert_eq!(parse_bandwidth("1Gbit/s"), Ok(1_000_000_000));
        assert_eq!(parse_bandwidth("2.5g"), Ok(2_500_000_000));
        assert_eq!(parse_bandwidth("1e9"), Ok(1_000_000_000));
        assert_eq!(parse_bandwidth("10kbit"), Ok(10_000));
        for bad in [
            "", "fast", "0", "-1gbit", "nanmbit", "1e30t", "100mbps", "inf",
        ] {
            let error = parse_bandwidth(bad).unwrap_err();
            assert!(error.contains(&format!("'{bad}'")), "{error}");
            assert!(error.contains("100mbit"), "{error}");
        }
    }

    #[test]
    fn cgroup_quotas_are_read_in_thousandths_of_a_core() {
        assert_eq!(quota_of_v2("50000 100000\n"), Some(500));
        assert_eq!(quota_of_v2("250000 100000"), Some(2500));
        assert_eq!(quota_of_v2("max 100000"), None);
        assert_eq!(quota_of_v1("50000\n", "100000\n"), Some(500));
        assert_eq!(quota_of_v1("-1", "100000"), None);
        assert!(process_cores_milli() >= 1);
    }

    #[test]
    fn a_written_record_carries_its_row_on_the_wire() {
        let narrow = Schema::new(vec![
            Field::new("key", DataType::Int64, false),
            Field::new("a", DataType::Int64, false),
        ]);
        let wide = Schema::new(vec![
            Field::new("key", DataType::Int64, false),
            Field::new("name", DataType::Utf8, true),
            Field::new("flag", DataType::Boolean, true),
        ]);
        assert_eq!(record_bytes(&narrow, &wide, false), COUNTED_RECORD_BYTES);
        // (9 + 9) and (9 + 34 + 2), averaged.
        assert_eq!(
            record_bytes(&narrow, &wide, true),
            COUNTED_RECORD_BYTES + 31
        );
    }
}
