//! The report: each target's row, printed as it is measured (the measurement, the ratio to the
//! baseline, the goal, and whether it is met), and the summary table of all rows at the end.

use std::time::Duration;

use crate::harness::{fmt, median, ratio};

struct Row {
    target: String,
    measured: String,
    ratio: String,
    goal: String,
    met: Option<bool>,
}

#[derive(Default)]
pub(crate) struct Report(Vec<Row>);

impl Report {
    /// A row comparing the medians of `measured` and `baseline`, met when their ratio is at
    /// most `limit` (none: for information).
    pub(crate) fn compare(
        &mut self,
        target: &str,
        measured: &[Duration],
        baseline: &[Duration],
        goal: &str,
        limit: Option<f64>,
    ) {
        let (m, b) = (median(measured), median(baseline));
        let r = ratio(m, b);
        self.row(
            target,
            format!("{} vs {}", fmt(m), fmt(b)),
            format!("{r:.2}×"),
            goal,
            limit.map(|limit| r <= limit),
        );
    }

    pub(crate) fn row(
        &mut self,
        target: &str,
        measured: String,
        ratio: String,
        goal: &str,
        met: Option<bool>,
    ) {
        let mark = match met {
            Some(true) => "yes",
            Some(false) => "NO",
            None => "-",
        };
        println!("  => {target}: {measured}, {ratio} (target {goal}): {mark}");
        self.0.push(Row {
            target: target.to_string(),
            measured,
            ratio,
            goal: goal.to_string(),
            met,
        });
    }

    /// The summary table, in Markdown.
    pub(crate) fn print(&self) {
        println!("\n## Summary\n");
        println!("| target | measured | ratio | goal | met |");
        println!("|---|---|---|---|---|");
        for row in &self.0 {
            let met = match row.met {
                Some(true) => "yes",
                Some(false) => "**no**",
                None => "-",
            };
            println!(
                "| {} | {} | {} | {} | {met} |",
                row.target, row.measured, row.ratio, row.goal
            );
        }
    }
}
