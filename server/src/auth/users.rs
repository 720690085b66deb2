//! The people and scripts of users mode, read from TOML (`--users-file` or `LASTWORD_USERS`):
//! `[[user]]` entries sign in with a password, `[[token]]` entries call the API with a bearer
//! token. Everything is validated at start-up, so a typo refuses to start instead of locking
//! someone out at 3 a.m.
//!
//! Passwords are stored as argon2 PHC strings: people pick guessable passwords, so their hash
//! must be slow to brute-force. API tokens are 32 random bytes, far beyond brute force, so a
//! plain SHA-256 is the right hash for them: it keeps every API call cheap (an argon2 check
//! per request would cost tens of milliseconds and memory) without making a leaked file any
//! more useful to an attacker.

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use lastword_core::{Principal, Role, SignIn};
use rand::rngs::OsRng;
use rand::RngCore;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::sync::LazyLock;

/// Why a users file was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum UsersError {
    #[error("not valid users TOML: {0}")]
    Syntax(String),
    #[error("{kind} {name:?}: unknown role {role:?} (expected \"viewer\" or \"operator\")")]
    UnknownRole { kind: &'static str, name: String, role: String },
    #[error("{kind} {name:?} is defined more than once (names are unique across users and tokens)")]
    Duplicate { kind: &'static str, name: String },
    #[error("a {kind} has an empty name")]
    EmptyName { kind: &'static str },
    #[error("user {name:?}: password_hash is not an argon2 PHC string ({reason}); make one with `lastword hash-password`")]
    BadPasswordHash { name: String, reason: String },
    #[error("token {name:?}: sha256 must be 64 hex digits; make one with `lastword new-token`")]
    BadTokenHash { name: String },
    #[error("users mode needs at least one [[user]] or [[token]]")]
    Empty,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    user: Vec<UserEntry>,
    #[serde(default)]
    token: Vec<TokenEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UserEntry {
    name: String,
    role: String,
    password_hash: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenEntry {
    name: String,
    role: String,
    sha256: String,
}

#[derive(Clone, Debug)]
struct User {
    role: Role,
    password_hash: String,
}

#[derive(Clone, Debug)]
struct Token {
    name: String,
    role: Role,
    sha256: [u8; 32],
}

/// The validated users and tokens.
#[derive(Clone, Debug, Default)]
pub struct Users {
    users: BTreeMap<String, User>,
    tokens: Vec<Token>,
}

impl Users {
    /// Parses and validates the TOML text; every problem is an error naming the entry.
    pub fn parse(text: &str) -> Result<Users, UsersError> {
        let file: File = toml::from_str(text).map_err(|e| UsersError::Syntax(e.to_string()))?;
        let mut out = Users::default();
        let mut names = std::collections::BTreeSet::new();
        let mut check_name = |kind: &'static str, name: &str| {
            if name.trim().is_empty() {
                return Err(UsersError::EmptyName { kind });
            }
            if !names.insert(name.to_string()) {
                return Err(UsersError::Duplicate { kind, name: name.to_string() });
            }
            Ok(())
        };
        let role = |kind: &'static str, name: &str, role: &str| {
            Role::parse(role).ok_or_else(|| UsersError::UnknownRole {
                kind,
                name: name.to_string(),
                role: role.to_string(),
            })
        };
        for u in file.user {
            check_name("user", &u.name)?;
            let role = role("user", &u.name, &u.role)?;
            check_password_hash(&u.password_hash)
                .map_err(|reason| UsersError::BadPasswordHash { name: u.name.clone(), reason })?;
            out.users.insert(u.name, User { role, password_hash: u.password_hash });
        }
        for t in file.token {
            check_name("token", &t.name)?;
            let role = role("token", &t.name, &t.role)?;
            let sha256 = parse_hex32(&t.sha256).ok_or(UsersError::BadTokenHash { name: t.name.clone() })?;
            out.tokens.push(Token { name: t.name, role, sha256 });
        }
        if out.users.is_empty() && out.tokens.is_empty() {
            return Err(UsersError::Empty);
        }
        Ok(out)
    }

    /// How many password users there are.
    pub fn user_count(&self) -> usize {
        self.users.len()
    }

    /// How many API tokens there are.
    pub fn token_count(&self) -> usize {
        self.tokens.len()
    }

    /// "3 users, 1 token", for the start-up log.
    pub fn summary(&self) -> String {
        let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
        format!("{}, {}", plural(self.user_count(), "user"), plural(self.token_count(), "token"))
    }

    /// The principal of a signed-in session's user, if that user still exists (a user removed
    /// from the file loses access at their next request).
    pub fn session_principal(&self, name: &str) -> Option<Principal> {
        let user = self.users.get(name)?;
        Some(Principal { name: name.to_string(), role: user.role, via: SignIn::Session })
    }

    /// Checks a password. Slow on purpose (argon2), and as slow for an unknown name as for a
    /// known one, so the timing does not reveal who has an account. Run it off the async
    /// threads (`spawn_blocking`).
    pub fn verify_password(&self, name: &str, password: &str) -> Option<Principal> {
        let (hash, user) = match self.users.get(name) {
            Some(user) => (user.password_hash.as_str(), Some(user)),
            None => (DUMMY_HASH.as_str(), None),
        };
        let ok = PasswordHash::new(hash)
            .map(|parsed| Argon2::default().verify_password(password.as_bytes(), &parsed).is_ok())
            .unwrap_or(false);
        match (ok, user) {
            (true, Some(user)) => {
                Some(Principal { name: name.to_string(), role: user.role, via: SignIn::Session })
            }
            _ => None,
        }
    }

    /// The principal of an API bearer token, compared by SHA-256 (see the module header).
    pub fn token_principal(&self, token: &str) -> Option<Principal> {
        let presented = sha256(token);
        // Check every entry, comparing in constant time, so timing reveals nothing.
        let mut found = None;
        for t in &self.tokens {
            if constant_time_eq(&presented, &t.sha256) && found.is_none() {
                found = Some(Principal { name: t.name.clone(), role: t.role, via: SignIn::Token });
            }
        }
        found
    }
}

/// The hash verified when the user name is unknown: the same algorithm and cost as
/// `lastword hash-password` makes, so a miss takes as long as a wrong password.
static DUMMY_HASH: LazyLock<String> =
    LazyLock::new(|| hash_password("no such user; this only burns the same time"));

/// An argon2id PHC string for `password`, with a fresh random salt (`lastword hash-password`).
pub fn hash_password(password: &str) -> String {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .expect("argon2 with default parameters hashes any password")
        .to_string()
}

fn check_password_hash(hash: &str) -> Result<(), String> {
    let parsed = PasswordHash::new(hash).map_err(|e| e.to_string())?;
    if !parsed.algorithm.as_str().starts_with("argon2") {
        return Err(format!("algorithm {} is not argon2", parsed.algorithm));
    }
    argon2::Params::try_from(&parsed).map_err(|e| e.to_string())?;
    if parsed.hash.is_none() {
        return Err("no hash in it".to_string());
    }
    Ok(())
}

/// A fresh API token (`lw_` and 64 hex digits of OS randomness) and its SHA-256 in hex.
pub fn new_token() -> (String, String) {
    let mut bytes = [0u8; 32];
    OsRng.fill_bytes(&mut bytes);
    let token = format!("lw_{}", hex(&bytes));
    let digest = hex(&sha256(&token));
    (token, digest)
}

/// SHA-256 of a token, in hex, as the `sha256` of a `[[token]]` entry.
pub fn token_sha256_hex(token: &str) -> String {
    hex(&sha256(token))
}

fn sha256(s: &str) -> [u8; 32] {
    Sha256::digest(s.as_bytes()).into()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn parse_hex32(s: &str) -> Option<[u8; 32]> {
    let s = s.trim();
    if s.len() != 64 || !s.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(hash: &str, sha: &str) -> String {
        format!(
            "[[user]]\nname = \"alice\"\nrole = \"operator\"\npassword_hash = \"{hash}\"\n\n\
             [[token]]\nname = \"bot\"\nrole = \"viewer\"\nsha256 = \"{sha}\"\n"
        )
    }

    #[test]
    fn passwords_and_tokens_are_checked_against_their_hashes() {
        let (token, sha) = new_token();
        let users = Users::parse(&file(&hash_password("s3cret"), &sha)).unwrap();
        assert_eq!(users.summary(), "1 user, 1 token");
        let alice = users.verify_password("alice", "s3cret").unwrap();
        assert_eq!((alice.name.as_str(), alice.role, alice.via), ("alice", Role::Operator, SignIn::Session));
        assert!(users.verify_password("alice", "wrong").is_none());
        assert!(users.verify_password("mallory", "s3cret").is_none());
        let bot = users.token_principal(&token).unwrap();
        assert_eq!((bot.name.as_str(), bot.role, bot.via), ("bot", Role::Viewer, SignIn::Token));
        assert!(users.token_principal("lw_0000").is_none());
        assert!(users.token_principal(&sha).is_none(), "the hash itself is not a token");
        assert!(users.session_principal("alice").is_some());
        assert!(users.session_principal("bob").is_none());
    }

    #[test]
    fn bad_files_are_refused_with_the_entry_named() {
        let (_, sha) = new_token();
        let hash = hash_password("x");
        let err = |text: &str| Users::parse(text).unwrap_err();
        assert!(matches!(err(&file(&hash, &sha).replace("\"viewer\"", "\"admin\"")),
            UsersError::UnknownRole { name, role, .. } if name == "bot" && role == "admin"));
        assert!(matches!(err(&file(&hash, &sha).replace("\"bot\"", "\"alice\"")),
            UsersError::Duplicate { name, .. } if name == "alice"));
        assert!(
            matches!(err(&file("$2b$10$notargon", &sha)), UsersError::BadPasswordHash { name, .. } if name == "alice")
        );
        assert!(matches!(err(&file("plaintext", &sha)), UsersError::BadPasswordHash { .. }));
        assert!(matches!(err(&file(&hash, "abc")), UsersError::BadTokenHash { name } if name == "bot"));
        assert_eq!(err(""), UsersError::Empty);
        assert!(matches!(err("[[user]]\nname = \"a\"\n"), UsersError::Syntax(_)));
        assert!(matches!(err("[[admin]]\nname = \"a\"\n"), UsersError::Syntax(_)));
        let message = err(&file(&hash, &sha).replace("\"viewer\"", "\"admin\"")).to_string();
        assert!(message.contains("bot") && message.contains("admin"), "{message}");
    }

    #[test]
    fn token_hashes_are_hex_sha256() {
        assert_eq!(
            token_sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(parse_hex32(&token_sha256_hex("abc")), Some(sha256("abc")));
    }
}
