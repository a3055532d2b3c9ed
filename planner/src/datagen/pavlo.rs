//! A web-log pair in the style of the benchmark of Pavlo et al. ("A comparison of approaches to
//! large-scale data analysis", SIGMOD 2009), which the VPRP paper joins:
//!
//! * `rankings(pageURL, pageRank, avgDuration)`: one row per page, `pageURL` unique;
//! * `uservisits(sourceIP, destURL, visitDate, adRevenue, userAgent, countryCode, languageCode,
//!   searchWord, duration)`: one row per visit, `destURL` Zipf over the pages (the same
//!   inverse-CDF sampler and rank permutation as [`generate`](super::generate)), except a share
//!   `noise` of visits whose `destURL` is a page absent from `rankings` ("join noise").
//!
//! The join is `rankings.pageURL = uservisits.destURL`; its key is a string. Absent pages get
//! URLs of the same shape as present ones and sort among them (a URL starts with a hash of the
//! page id), so join data and noise interleave in key order, which is what VPRP's separation of
//! the two is for.
//!
//! Deterministic and platform independent like the rest of [`datagen`](super): the PRNG is ours,
//! every random decision is integer arithmetic on `u64`, and `adRevenue` is a whole number of
//! cents divided by 100 (one correctly rounded IEEE division, the same everywhere).

use super::{permutation, unit_f64, JoinCounts, Xoshiro256StarStar, ZipfTable, MAX_KEYS, MAX_ROWS};
use crate::error::PlanError;
use crate::usage_err;

// Stream tags, distinct from those of the plain generator.
const TAG_PAGES: u64 = 0x5041_564c_5041_4745; // "PAVLPAGE"
const TAG_VISIT_KEYS: u64 = 0x5041_564c_4b45_5953; // "PAVLKEYS"
const TAG_VISIT_VALUES: u64 = 0x5041_564c_5641_4c53; // "PAVLVALS"
const TAG_PERM: u64 = 0x5041_564c_5045_524d; // "PAVLPERM"
const TAG_URL: u64 = 0x5041_564c_5552_4c53; // "PAVLURLS"

const USER_AGENTS: [&str; 6] = [
    "Mozilla/5.0 (Windows NT 6.1)",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_6)",
    "Mozilla/5.0 (X11; Linux x86_64)",
    "Opera/9.80 (Windows NT 5.1)",
    "Mozilla/4.0 (compatible; MSIE 8.0)",
    "Googlebot/2.1",
];
const COUNTRIES: [&str; 8] = ["USA", "DEU", "FRA", "GBR", "JPN", "BRA", "IND", "CHN"];
const LANGUAGES: [&str; 8] = [
    "en-US", "de-DE", "fr-FR", "en-GB", "ja-JP", "pt-BR", "hi-IN", "zh-CN",
];

/// How to generate a rankings / uservisits pair.
#[derive(Clone, Debug, PartialEq)]
pub struct PavloSpec {
    /// Pages, the rows of `rankings`.
    pub pages: u64,
    /// Visits, the rows of `uservisits`.
    pub visits: u64,
    /// Zipf exponent of `destURL` over the pages (0 = uniform).
    pub skew: f64,
    /// Share of visits (0..=1) whose `destURL` is a page absent from `rankings`.
    pub noise: f64,
    /// The same seed gives the same tables.
    pub seed: u64,
}

impl Default for PavloSpec {
    fn default() -> Self {
        PavloSpec {
            pages: 10_000,
            visits: 100_000,
            skew: 1.0,
            noise: 0.0,
            seed: 42,
        }
    }
}

impl PavloSpec {
    /// Checks the spec before anything is allocated.
    ///
    /// # Errors
    ///
    /// A usage error naming the command-line flag: `--rows` (visits) above [`MAX_ROWS`], `--keys`
    /// (pages) outside `1..=MAX_KEYS`, `--skew`
    /// negative or not finite, `--noise` outside `[0, 1]`.
    pub fn validate(&self) -> Result<(), PlanError> {
        if self.visits > MAX_ROWS {
            return usage_err!(
                "--rows (visits) must be at most {MAX_ROWS}, got {}",
                self.visits
            );
        }
        if !(1..=MAX_KEYS).contains(&self.pages) {
            return usage_err!(
                "--keys (pages) must be between 1 and {MAX_KEYS}, got {}",
                self.pages
            );
        }
        if !(self.skew.is_finite() && self.skew >= 0.0) {
            return usage_err!("--skew must be a finite number >= 0, got {}", self.skew);
        }
        if !(0.0..=1.0).contains(&self.noise) {
            return usage_err!("--noise must be between 0 and 1, got {}", self.noise);
        }
        Ok(())
    }
}

/// The `rankings` table, column by column.
#[derive(Clone, Debug, PartialEq)]
pub struct Rankings {
    /// Unique page URLs.
    pub page_url: Vec<String>,
    /// 1..=1000.
    pub page_rank: Vec<i64>,
    /// Seconds, 1..=100.
    pub avg_duration: Vec<i64>,
}

/// The `uservisits` table, column by column.
#[derive(Clone, Debug, PartialEq)]
pub struct UserVisits {
    /// Dotted IPv4 addresses.
    pub source_ip: Vec<String>,
    /// The visited page's URL; a share `noise` of them are not in `rankings`.
    pub dest_url: Vec<String>,
    /// Days since 1970-01-01, in 2000-01-01..2010-01-01 (an Arrow `Date32`).
    pub visit_date: Vec<i32>,
    /// 0.00..1000.00, whole cents.
    pub ad_revenue: Vec<f64>,
    /// One of a few browser strings.
    pub user_agent: Vec<String>,
    /// Three-letter country codes.
    pub country_code: Vec<String>,
    /// Language tags such as `en-US`.
    pub language_code: Vec<String>,
    /// A lowercase word of 3 to 10 letters.
    pub search_word: Vec<String>,
    /// Seconds, 1..=100.
    pub duration: Vec<i64>,
}

/// The generated pair, plus the page ids behind the URLs (for exact join counts).
#[derive(Clone, Debug, PartialEq)]
pub struct PavloPair {
    /// One row per page `0..pages`, in page-id order.
    pub rankings: Rankings,
    /// One row per visit.
    pub uservisits: UserVisits,
    /// The page id of each visit's `destURL`; ids `>= pages` are absent from `rankings`.
    pub dest_page: Vec<i64>,
}

impl PavloPair {
    /// Exact output sizes of `rankings` (left) joined with `uservisits` (right) on
    /// `pageURL = destURL`. `inner` is the number of visits whose page is in `rankings`.
    pub fn counts(&self) -> JoinCounts {
        let pages: Vec<i64> = (0..self.rankings.page_url.len() as i64).collect();
        JoinCounts::of(&pages, &self.dest_page)
    }
}

/// The URL of page `id`: a hash of the id first, so that URLs sort in no relation to the id (nor
/// to the page's popularity), then the id, which keeps URLs unique.
pub fn page_url(id: u64, seed: u64) -> String {
    let mut rng = Xoshiro256StarStar::derive(seed ^ TAG_URL, id);
    let site = rng.next_u64() >> 32;
    format!("http://www.{site:08x}.example.com/page{id}.html")
}

/// Generates the pair described by `spec`: deterministic, the same on every platform.
///
/// # Panics
///
/// If `spec.validate()` fails.
pub fn generate_pavlo(spec: &PavloSpec) -> PavloPair {
    if let Err(e) = spec.validate() {
        panic!("invalid PavloSpec: {e}");
    }
    let pages = spec.pages;
    let url = |id: u64| page_url(id, spec.seed);

    let mut page_rng = Xoshiro256StarStar::derive(spec.seed, TAG_PAGES);
    let n = usize::try_from(pages).expect("page count does not fit in memory");
    let mut rankings = Rankings {
        page_url: Vec::with_capacity(n),
        page_rank: Vec::with_capacity(n),
        avg_duration: Vec::with_capacity(n),
    };
    for id in 0..pages {
        rankings.page_url.push(url(id));
        rankings.page_rank.push(1 + page_rng.below(1000) as i64);
        rankings.avg_duration.push(1 + page_rng.below(100) as i64);
    }

    // Only a skewed destURL needs the CDF table and the rank permutation.
    let zipf = (spec.skew > 0.0).then(|| {
        (
            ZipfTable::new(pages, spec.skew),
            permutation(pages, spec.seed, TAG_PERM),
        )
    });
    let mut key_rng = Xoshiro256StarStar::derive(spec.seed, TAG_VISIT_KEYS);
    let mut value_rng = Xoshiro256StarStar::derive(spec.seed, TAG_VISIT_VALUES);
    let m = usize::try_from(spec.visits).expect("visit count does not fit in memory");
    let mut visits = UserVisits {
        source_ip: Vec::with_capacity(m),
        dest_url: Vec::with_capacity(m),
        visit_date: Vec::with_capacity(m),
        ad_revenue: Vec::with_capacity(m),
        user_agent: Vec::with_capacity(m),
        country_code: Vec::with_capacity(m),
        language_code: Vec::with_capacity(m),
        search_word: Vec::with_capacity(m),
        duration: Vec::with_capacity(m),
    };
    let mut dest_page = Vec::with_capacity(m);
    // 2000-01-01 is day 10957 of the Unix epoch; ten years later is day 14610.
    const FIRST_DAY: u64 = 10_957;
    const DAYS: u64 = 14_610 - FIRST_DAY;
    for _ in 0..spec.visits {
        // Same order of draws as the plain generator: the noise coin (only when there is noise),
        // then the page.
        let is_noise = spec.noise > 0.0 && unit_f64(key_rng.next_u53()) < spec.noise;
        let page = if is_noise {
            pages + key_rng.below(pages)
        } else {
            match &zipf {
                Some((table, perm)) => u64::from(perm[table.rank(key_rng.next_u53()) as usize]),
                None => key_rng.below(pages),
            }
        };
        dest_page.push(page as i64);
        visits.dest_url.push(url(page));

        let r = &mut value_rng;
        let ip = r.next_u64();
        visits.source_ip.push(format!(
            "{}.{}.{}.{}",
            1 + (ip >> 56) % 223,
            (ip >> 48) & 0xff,
            (ip >> 40) & 0xff,
            1 + (ip >> 32) % 254
        ));
        visits.visit_date.push((FIRST_DAY + r.below(DAYS)) as i32);
        visits.ad_revenue.push(r.below(100_000) as f64 / 100.0);
        visits
            .user_agent
            .push(USER_AGENTS[r.below(USER_AGENTS.len() as u64) as usize].to_string());
        let country = r.below(COUNTRIES.len() as u64) as usize;
        visits.country_code.push(COUNTRIES[country].to_string());
        visits.language_code.push(LANGUAGES[country].to_string());
        let letters = 3 + r.below(8);
        visits.search_word.push(
            (0..letters)
                .map(|_| char::from(b'a' + r.below(26) as u8))
                .collect(),
        );
        visits.duration.push(1 + r.below(100) as i64);
    }
    PavloPair {
        rankings,
        uservisits: visits,
        dest_page,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{HashMap, HashSet};

    use super::*;

    fn small(noise: f64, skew: f64) -> PavloSpec {
        PavloSpec {
            pages: 500,
            visits: 20_000,
            skew,
            noise,
            seed: 9,
        }
    }

    #[test]
    fn page_urls_are_unique_and_urls_follow_page_ids() {
        let pair = generate_pavlo(&small(0.2, 1.0));
        let urls: HashSet<&String> = pair.rankings.page_url.iter().collect();
        assert_eq!(urls.len(), 500);
        for (url, &page) in pair.uservisits.dest_url.iter().zip(&pair.dest_page) {
            assert_eq!(*url, page_url(page as u64, 9));
            assert_eq!(urls.contains(url), page < 500, "{url}");
        }
        // Every column has a row per visit.
        let v = &pair.uservisits;
        let n = pair.dest_page.len();
        for len in [
            v.source_ip.len(),
            v.dest_url.len(),
            v.visit_date.len(),
            v.ad_revenue.len(),
            v.user_agent.len(),
            v.country_code.len(),
            v.language_code.len(),
            v.search_word.len(),
            v.duration.len(),
        ] {
            assert_eq!(len, n);
        }
        assert_eq!(n, 20_000);
    }

    #[test]
    fn noise_share_and_counts_are_exact() {
        let pair = generate_pavlo(&small(0.3, 1.0));
        let absent = pair.dest_page.iter().filter(|&&p| p >= 500).count() as u64;
        assert!((absent as f64 / 20_000.0 - 0.3).abs() < 0.02, "{absent}");
        let counts = pair.counts();
        // pageURL is unique: every present visit matches exactly one ranking.
        assert_eq!(counts.inner, 20_000 - absent);
        assert_eq!(counts.right_anti, absent);
        assert_eq!(counts.inner, counts.right_semi);
        assert_eq!(
            counts.left_semi,
            pair.dest_page
                .iter()
                .filter(|&&p| p < 500)
                .collect::<HashSet<_>>()
                .len() as u64
        );
        // No noise: everything joins.
        assert_eq!(generate_pavlo(&small(0.0, 1.0)).counts().inner, 20_000);
    }

    #[test]
    fn dest_urls_are_zipf_and_noise_interleaves_in_key_order() {
        let pair = generate_pavlo(&small(0.2, 1.2));
        let mut counts: HashMap<i64, u64> = HashMap::new();
        for &p in pair.dest_page.iter().filter(|&&p| p < 500) {
            *counts.entry(p).or_default() += 1;
        }
        let top = *counts.values().max().unwrap() as f64;
        let h: f64 = (1..=500).map(|r| libm::pow(r as f64, -1.2)).sum();
        let expected = 0.8 * 20_000.0 / h;
        assert!(
            (top - expected).abs() < 0.1 * expected,
            "{top} vs {expected}"
        );
        // Sorted by URL, present and absent pages alternate often (not two blocks).
        let mut keys: Vec<(&String, bool)> = pair
            .uservisits
            .dest_url
            .iter()
            .zip(&pair.dest_page)
            .map(|(u, &p)| (u, p < 500))
            .collect();
        keys.sort();
        keys.dedup();
        let switches = keys.windows(2).filter(|w| w[0].1 != w[1].1).count();
        assert!(switches > 50, "{switches}");
        // Uniform destURL works too.
        assert_eq!(generate_pavlo(&small(0.0, 0.0)).counts().inner, 20_000);
    }

    #[test]
    fn deterministic_in_the_seed_and_pinned() {
        let spec = PavloSpec {
            pages: 20,
            visits: 3,
            skew: 1.0,
            noise: 0.5,
            seed: 2024,
        };
        let a = generate_pavlo(&spec);
        assert_eq!(a, generate_pavlo(&spec));
        assert_ne!(
            a.uservisits,
            generate_pavlo(&PavloSpec { seed: 1, ..spec }).uservisits
        );
        // Pins the streams: a change would break parity with files already generated.
        assert_eq!(a.dest_page, PINNED_DEST);
        assert_eq!(
            a.uservisits.dest_url[0],
            page_url(PINNED_DEST[0] as u64, 2024)
        );
        assert_eq!(a.rankings.page_url[0], PINNED_URL0);
        let v = &a.uservisits;
        assert_eq!(
            (
                v.source_ip[0].as_str(),
                v.visit_date[0],
                v.ad_revenue[0],
                v.search_word[0].as_str(),
                v.duration[0],
                a.rankings.page_rank[0],
            ),
            PINNED_FIRST_VISIT
        );
    }
    const PINNED_DEST: [i64; 3] = [7, 28, 31];
    const PINNED_URL0: &str = "http://www.39ecb443.example.com/page0.html";
    const PINNED_FIRST_VISIT: (&str, i32, f64, &str, i64, i64) =
        ("199.178.115.243", 11177, 545.06, "tdconflzf", 66, 404);

    #[test]
    fn validate_names_the_flags() {
        let d = PavloSpec::default;
        assert_eq!(d().validate(), Ok(()));
        assert!(PavloSpec { pages: 0, ..d() }
            .validate()
            .unwrap_err()
            .message()
            .starts_with("--keys"));
        assert!(PavloSpec { skew: -1.0, ..d() }
            .validate()
            .unwrap_err()
            .message()
            .starts_with("--skew"));
        assert!(PavloSpec { noise: 1.5, ..d() }
            .validate()
            .unwrap_err()
            .message()
            .starts_with("--noise"));
    }
}
