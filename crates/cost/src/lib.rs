//! # tickwork-cost
//!
//! What tickwork costs, modelled from the code's own decisions rather than measured on AWS (there
//! is no account here): the requests and capacity units each job makes for a load ([`cost`]),
//! the month's bill in dollars with every price a named constant with its source and date
//! ([`bill`]), the time a zone's boundary takes to sweep ([`boundary`]) and to deliver to the
//! handlers ([`delivery`]), and what delivering to a target adds ([`targets`]). `tickctl cost` prints it; `make run` and the tests hold it against
//! live runs.
//!
//! A crate of its own because it grew with delivery (and grows with schedules): `tickctl`
//! re-exports these modules under their old paths (`tickctl::cost`, `tickctl::bill`, ...).

pub mod bill;
pub mod boundary;
pub mod burst;
pub mod control;
pub mod cost;
pub mod delivery;
pub mod prices;
pub mod schedules;
pub mod targets;
