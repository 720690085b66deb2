//! One way to declare a closed vocabulary: a string column or parameter whose values the code
//! knows (`tasks.status`, `runs[].reclaim_reason`, …) becomes an enum that serialises as its
//! text, parses with an error that lists what is allowed, and lists itself in `ALL`.

/// `string_enum!(/// docs \n Name, "field" { /// docs \n Variant => "text", … })`.
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
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
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

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}
