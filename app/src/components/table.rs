//! A data table's frame with its columns as data: each page says what its columns are (a label,
//! whether the values are numbers, what a hover explains) and the header row's markup is written
//! once. The rows stay the page's own.

use leptos::prelude::*;

/// One column's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Column {
    pub label: &'static str,
    /// Numbers are right-aligned (`class="num"`) so their digits line up.
    pub numeric: bool,
    /// The header's tooltip: what the column counts when its label cannot say it all.
    pub title: Option<&'static str>,
}

impl Column {
    pub const fn text(label: &'static str) -> Self {
        Column { label, numeric: false, title: None }
    }

    pub const fn num(label: &'static str) -> Self {
        Column { label, numeric: true, title: None }
    }

    pub const fn titled(self, title: &'static str) -> Self {
        Column { title: Some(title), ..self }
    }
}

/// `<table class="grid …">` with a header row of `columns` and the rows given as children.
#[component]
pub fn DataTable(
    columns: &'static [Column],
    /// Extra classes beside `grid` (`narrow`).
    #[prop(optional)]
    class: Option<&'static str>,
    /// The `data-testid` scripts and tests find the table by.
    #[prop(optional)]
    testid: Option<&'static str>,
    children: Children,
) -> impl IntoView {
    let class = match class {
        Some(extra) => format!("grid {extra}"),
        None => "grid".to_string(),
    };
    view! {
        <table class=class data-testid=testid>
            <thead>
                <tr>
                    {columns
                        .iter()
                        .map(|c| {
                            view! {
                                <th scope="col" class=c.numeric.then_some("num") title=c.title>
                                    {c.label}
                                </th>
                            }
                        })
                        .collect_view()}
                </tr>
            </thead>
            <tbody>{children()}</tbody>
        </table>
    }
}
