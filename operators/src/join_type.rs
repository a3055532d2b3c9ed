//! The join types every strategy supports, and what each one keeps of either side.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// One side of a join.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Side {
    /// The left input.
    Left,
    /// The right input.
    Right,
}

impl Side {
    /// The other side.
    pub fn other(self) -> Side {
        match self {
            Side::Left => Side::Right,
            Side::Right => Side::Left,
        }
    }

    /// 0 for the left side, 1 for the right: where a side's entry is in a pair of per-side
    /// values.
    pub fn index(self) -> usize {
        match self {
            Side::Left => 0,
            Side::Right => 1,
        }
    }
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Side::Left => "left",
            Side::Right => "right",
        })
    }
}

/// An equi-join type with SQL semantics: a NULL key matches nothing; on a preserved side a row
/// with a NULL key is emitted padded, otherwise it is dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum JoinType {
    /// Matched pairs only.
    Inner,
    /// Matched pairs, and left rows without a partner padded with NULLs.
    Left,
    /// Matched pairs, and right rows without a partner padded with NULLs.
    Right,
    /// Matched pairs, and unmatched rows of both sides padded.
    Full,
    /// Left rows with at least one partner, each once.
    LeftSemi,
    /// Left rows with no partner (a NULL key has none).
    LeftAnti,
    /// Right rows with at least one partner, each once.
    RightSemi,
    /// Right rows with no partner.
    RightAnti,
}

impl JoinType {
    /// Every join type, for tests and documentation.
    pub const ALL: [JoinType; 8] = [
        JoinType::Inner,
        JoinType::Left,
        JoinType::Right,
        JoinType::Full,
        JoinType::LeftSemi,
        JoinType::LeftAnti,
        JoinType::RightSemi,
        JoinType::RightAnti,
    ];

    /// Whether unmatched rows of `side` appear in the output (padded or, for anti joins, as is).
    /// Such rows need global knowledge of "matched anywhere".
    pub fn keeps_unmatched(self, side: Side) -> bool {
        use JoinType::*;
        match side {
            Side::Left => matches!(self, Left | Full | LeftAnti),
            Side::Right => matches!(self, Right | Full | RightAnti),
        }
    }

    /// Whether the output depends on which rows of `side` matched: outer, semi and anti joins
    /// filtered or padded on that side.
    pub fn tracks_matches(self, side: Side) -> bool {
        self.keeps_unmatched(side) || self.semi_side() == Some(side)
    }

    /// Whether the output has matched pairs (inner and outer joins) rather than rows of one side.
    pub fn emits_pairs(self) -> bool {
        matches!(
            self,
            JoinType::Inner | JoinType::Left | JoinType::Right | JoinType::Full
        )
    }

    /// For semi joins, the side whose matched rows are emitted.
    pub fn semi_side(self) -> Option<Side> {
        match self {
            JoinType::LeftSemi => Some(Side::Left),
            JoinType::RightSemi => Some(Side::Right),
            _ => None,
        }
    }

    /// For anti joins, the side whose unmatched rows are emitted.
    pub fn anti_side(self) -> Option<Side> {
        match self {
            JoinType::LeftAnti => Some(Side::Left),
            JoinType::RightAnti => Some(Side::Right),
            _ => None,
        }
    }

    /// Whether output rows carry columns of `side`.
    pub fn outputs_side(self, side: Side) -> bool {
        self.emits_pairs() || self.semi_side() == Some(side) || self.anti_side() == Some(side)
    }

    /// The same join with the inputs swapped: `a LEFT JOIN b` is `b RIGHT JOIN a`.
    pub fn swapped(self) -> JoinType {
        use JoinType::*;
        match self {
            Inner => Inner,
            Left => Right,
            Right => Left,
            Full => Full,
            LeftSemi => RightSemi,
            LeftAnti => RightAnti,
            RightSemi => LeftSemi,
            RightAnti => LeftAnti,
        }
    }

    /// The name used on the command line and in metrics.
    pub fn name(self) -> &'static str {
        use JoinType::*;
        match self {
            Inner => "inner",
            Left => "left",
            Right => "right",
            Full => "full",
            LeftSemi => "semi",
            LeftAnti => "anti",
            RightSemi => "right-semi",
            RightAnti => "right-anti",
        }
    }
}

impl fmt::Display for JoinType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for JoinType {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        use JoinType::*;
        Ok(match s.to_ascii_lowercase().as_str() {
            "inner" => Inner,
            "left" | "left-outer" => Left,
            "right" | "right-outer" => Right,
            "full" | "full-outer" | "outer" => Full,
            "semi" | "left-semi" => LeftSemi,
            "anti" | "left-anti" => LeftAnti,
            "right-semi" => RightSemi,
            "right-anti" => RightAnti,
            other => {
                return Err(format!(
                    "unknown join type {other:?}: expected one of inner, left, right, full, semi, anti, right-semi, right-anti"
                ))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for how in JoinType::ALL {
            assert_eq!(how.name().parse::<JoinType>().unwrap(), how);
            assert_eq!(how.swapped().swapped(), how);
        }
        assert!("sideways".parse::<JoinType>().is_err());
    }

    #[test]
    fn preserved_sides() {
        assert!(JoinType::Full.keeps_unmatched(Side::Left));
        assert!(JoinType::Full.keeps_unmatched(Side::Right));
        assert!(!JoinType::Inner.tracks_matches(Side::Left));
        assert!(JoinType::LeftSemi.tracks_matches(Side::Left));
        assert!(!JoinType::LeftSemi.tracks_matches(Side::Right));
        assert!(!JoinType::LeftSemi.outputs_side(Side::Right));
        assert!(JoinType::RightAnti.outputs_side(Side::Right));
    }
}
