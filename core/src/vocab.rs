//! One way to declare a closed vocabulary: a string column or parameter whose values the code
//! knows (`tasks.status`, `runs[].reclaim_reason`, …) becomes an enum that serialises as its
//! text, parses with an error that lists what is allowed, and lists itself in `ALL`.

/// `string_enum!(/// docs \n Name, "field" { /// docs \n Variant => "text", … })`. Attributes
/// before the name (docs, an extra `#[derive(PartialOrd, Ord)]`) go on the enum.
macro_rules! string_enum {
    ($(#[$doc:meta])* $name:ident, $field:literal {
        $($(#[$vdoc:meta])* $variant:ident => $text:literal),+ $(,)?
    }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($(#[$vdoc])* $variant),+ }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: [$name; [$($text),+].len()] = [$($name::$variant),+];
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::state::UnknownValue;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($text => Ok($name::$variant),)+
                    _ => Err($crate::state::UnknownValue::new($field, s, &[$($text),+])),
                }
            }
        }

        /// Rows decode straight into the enum (`#[sqlx(try_from = "String")]` in the store); a
        /// value the schema should not admit is an error naming the column, not a default.
        impl TryFrom<String> for $name {
            type Error = $crate::state::UnknownValue;
            fn try_from(s: String) -> Result<Self, Self::Error> {
                s.parse()
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}
