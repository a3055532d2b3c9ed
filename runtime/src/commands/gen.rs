//! `skewjoin gen`: generated skewed pairs and the web-log tables, written to files.

use std::path::Path;

use skewjoin_planner::datagen::pavlo::{generate_pavlo, PavloSpec};
use skewjoin_planner::datagen::{generate, GenSpec, JoinCounts};

use crate::cli::{GenArgs, GenFlags};
use crate::error::{Error, Result};
use crate::generate::{rankings_batch, to_batch, uservisits_batch};
use crate::io::{write_table, FileFormat};

use super::write_stdout;

/// The generator spec from flags, with `defaults` for what is not given.
pub(super) fn gen_spec(flags: &GenFlags, defaults: GenSpec) -> Result<GenSpec> {
    let rows = flags.rows;
    let skew = flags.skew;
    let spec = GenSpec {
        left_rows: flags.left_rows.or(rows).unwrap_or(defaults.left_rows),
        right_rows: flags.right_rows.or(rows).unwrap_or(defaults.right_rows),
        keys: flags.keys.unwrap_or(defaults.keys),
        left_skew: flags.left_skew.or(skew).unwrap_or(defaults.left_skew),
        right_skew: flags.right_skew.or(skew).unwrap_or(defaults.right_skew),
        independent: flags.independent,
        noise: flags.noise,
        seed: flags.seed,
    };
    spec.validate()?;
    // Per row: the generator's key, id and value, and the Arrow batch made of them.
    let rows = u128::from(spec.left_rows) + u128::from(spec.right_rows);
    check_gen_memory(rows * 48 + u128::from(spec.keys) * ZIPF_BYTES_PER_KEY)?;
    Ok(spec)
}

/// The memory a Zipf sampler takes per key of its domain: its CDF and the key permutation.
const ZIPF_BYTES_PER_KEY: u128 = 16;

/// Refuses a generator run that needs, by the estimate `bytes`, more memory than is available:
/// the tables are built whole in memory before they are written.
fn check_gen_memory(bytes: u128) -> Result<()> {
    let Some(available) = crate::memory::available_bytes() else {
        return Ok(());
    };
    if bytes > u128::from(available) {
        const GIB: f64 = (1u64 << 30) as f64;
        return Err(Error::Usage(format!(
            "these sizes need about {:.1} GiB of memory to generate, but {:.1} GiB are \
             available; give fewer --rows or --keys",
            bytes as f64 / GIB,
            available as f64 / GIB
        )));
    }
    Ok(())
}

pub(super) fn describe(spec: &GenSpec) -> String {
    format!(
        "{} x {} rows over {} keys, Zipf {} / {}, {} hot keys, noise {}, seed {}",
        spec.left_rows,
        spec.right_rows,
        spec.keys,
        spec.left_skew,
        spec.right_skew,
        if spec.independent {
            "independent"
        } else {
            "shared"
        },
        spec.noise,
        spec.seed
    )
}

fn print_counts(counts: &JoinCounts) -> Result<()> {
    outln!("exact output rows of each join type:");
    for (name, rows) in [
        ("inner", counts.inner),
        ("left", counts.left),
        ("right", counts.right),
        ("full", counts.full),
        ("semi", counts.left_semi),
        ("anti", counts.left_anti),
        ("right-semi", counts.right_semi),
        ("right-anti", counts.right_anti),
    ] {
        outln!("  {name:<11} {rows}");
    }
    Ok(())
}

/// The web-log generator's spec from the flags of `gen --kind pavlo`: `--keys` pages (rankings
/// rows), `--rows` (or `--right-rows`) visits, `--skew` of destURL, `--noise`, `--seed`. Flags of
/// the plain pair that mean nothing here are refused rather than ignored.
fn pavlo_spec(flags: &GenFlags) -> Result<PavloSpec> {
    for (flag, given) in [
        ("--left-rows", flags.left_rows.is_some()),
        ("--left-skew", flags.left_skew.is_some()),
        ("--right-skew", flags.right_skew.is_some()),
        ("--independent", flags.independent),
    ] {
        if given {
            return Err(Error::Usage(format!(
                "{flag} does not apply to --kind pavlo: rankings has one row per page (--keys), \
                 uservisits has --rows rows whose destURL follows Zipf --skew"
            )));
        }
    }
    let defaults = PavloSpec::default();
    let spec = PavloSpec {
        pages: flags.keys.unwrap_or(defaults.pages),
        visits: flags.right_rows.or(flags.rows).unwrap_or(defaults.visits),
        skew: flags.skew.unwrap_or(defaults.skew),
        noise: flags.noise,
        seed: flags.seed,
    };
    spec.validate()?;
    // Per visit: four columns, two of them strings (an IP address and a URL), made twice (the
    // generator's and Arrow's); per page: a URL and two numbers, likewise.
    check_gen_memory(
        u128::from(spec.visits) * 160 + u128::from(spec.pages) * (120 + ZIPF_BYTES_PER_KEY),
    )?;
    Ok(spec)
}

/// Creates `gen`'s output directory.
fn create_out_dir(out: &Path) -> Result<()> {
    std::fs::create_dir_all(out)
        .map_err(|e| Error::Io(format!("{}: cannot create directory: {e}", out.display())))
}

/// `skewjoin gen --kind pavlo`: rankings and uservisits.
fn gen_pavlo(args: &GenArgs, format: FileFormat, extension: &str) -> Result<()> {
    let spec = pavlo_spec(&args.gen)?;
    create_out_dir(&args.out)?;
    let pair = generate_pavlo(&spec);
    let rankings = args.out.join(format!("rankings.{extension}"));
    let uservisits = args.out.join(format!("uservisits.{extension}"));
    write_table(&rankings, format, &rankings_batch(&pair.rankings))?;
    write_table(&uservisits, format, &uservisits_batch(&pair.uservisits))?;
    outln!("wrote {} and {}", rankings.display(), uservisits.display());
    outln!(
        "{} pages x {} visits, destURL Zipf {}, noise {}, seed {}; join on \
         rankings.pageURL = uservisits.destURL (--left-on pageURL --right-on destURL)",
        spec.pages,
        spec.visits,
        spec.skew,
        spec.noise,
        spec.seed
    );
    print_counts(&pair.counts())?;
    Ok(())
}

/// `skewjoin gen`.
pub fn gen(args: GenArgs) -> Result<()> {
    let format = FileFormat::parse(&args.format)?;
    let extension = match format {
        FileFormat::Parquet => "parquet",
        FileFormat::ArrowIpc => "arrow",
        FileFormat::Csv => "csv",
    };
    if args.kind == "pavlo" {
        return gen_pavlo(&args, format, extension);
    }
    let spec = gen_spec(&args.gen, GenSpec::default())?;
    create_out_dir(&args.out)?;
    let pair = generate(&spec);
    let left_path = args.out.join(format!("left.{extension}"));
    let right_path = args.out.join(format!("right.{extension}"));
    write_table(&left_path, format, &to_batch(&pair.left))?;
    write_table(&right_path, format, &to_batch(&pair.right))?;
    outln!("wrote {} and {}", left_path.display(), right_path.display());
    outln!("{}", describe(&spec));
    print_counts(&pair.counts())?;
    Ok(())
}
