//! End-to-end tests of the binaries: what a user types and sees.

mod cli;
mod slurm;
mod study;
