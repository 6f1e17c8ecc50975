//! Which grains a sweep pulses (`TICKWORK_PULSE_GRAINS`, the template's `PulseGrains`).
//!
//! Why a set: a team whose handlers need only local midnights should not pay for, nor write
//! handlers that ignore, week, month, quarter and year pulses. A grain left out is not owed: its
//! periods are neither pulsed nor caught up later (a zone group's watermark still stands for
//! every grain, so adding a grain back owes its periods from then on).

use crate::calendar::Grain;

/// A set of the pulsed grains.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grains(u8);

impl Grains {
    /// Every pulsed grain (the default).
    pub const ALL: Grains = Grains((1 << Grain::PULSED.len()) - 1);

    fn bit(g: Grain) -> u8 {
        Grain::PULSED.iter().position(|p| *p == g).map_or(0, |i| 1 << i)
    }

    /// Whether `g` is pulsed.
    pub fn contains(self, g: Grain) -> bool {
        self.0 & Self::bit(g) != 0
    }

    /// The grains, finest first.
    pub fn iter(self) -> impl Iterator<Item = Grain> {
        Grain::PULSED.into_iter().filter(move |g| self.contains(*g))
    }

    /// `day,week,month,quarter,year` (any of them, any order, at least one); an error names the
    /// one that is not a pulsed grain. Pure.
    pub fn parse(text: &str) -> Result<Grains, String> {
        let mut set = 0u8;
        for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let g = Grain::PULSED
                .into_iter()
                .find(|g| g.name() == name)
                .ok_or_else(|| format!("`{name}` is not a pulsed grain (day, week, month, quarter, year)"))?;
            set |= Self::bit(g);
        }
        if set == 0 {
            return Err("no grain: name at least one of day, week, month, quarter, year".into());
        }
        Ok(Grains(set))
    }
}

impl std::fmt::Display for Grains {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.iter().map(Grain::name).collect();
        f.write_str(&names.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_reads_back_and_refuses_what_is_not_a_pulsed_grain() {
        let s = Grains::parse(" month, day ").unwrap();
        assert!(s.contains(Grain::Day) && s.contains(Grain::Month) && !s.contains(Grain::Week));
        assert_eq!(s.to_string(), "day,month", "finest first");
        assert_eq!(Grains::parse("day,week,month,quarter,year").unwrap(), Grains::ALL);
        assert_eq!(Grains::ALL.iter().count(), 5);
        assert!(Grains::parse("hour").unwrap_err().contains("`hour`"));
        assert!(Grains::parse(" , ").unwrap_err().contains("no grain"));
    }
}
