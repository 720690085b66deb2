//! How the browser bundle (`/pkg/*`: wasm, js, css) and every other response travel.
//!
//! - **Compressed** (zstd, brotli or gzip, whichever the browser accepts): the wasm bundle is
//!   most of a first visit (1.4 MB raw) and compresses to about a quarter. A release build ships the
//!   bundle precompressed (`cargo leptos build --release --precompress` writes `.br` and `.gz`
//!   beside each file, at brotli's best level, which no on-the-fly encoder can afford); the
//!   bundle's file service sends those. Everything else (pages, JSON) is compressed on the fly;
//!   tower-http's default predicate leaves out server-sent events (compression would buffer the
//!   live stream), images and tiny bodies, and never encodes a body twice.
//! - **Cached for good when the name is the content**: cargo-leptos `hash-files` names the
//!   bundle `lastword.<md5>.{js,wasm,css}` (and, built with `--split`, each page's wasm chunk
//!   and the chunk loader `<name>.<md5>.{wasm,js}`) and leaves `hash.txt` beside the binary;
//!   pages then name those files ([`use_hashed_names`] decides), and the bundle is served
//!   `immutable` for a year, so a repeat visit asks for nothing. A name without a hash (a
//!   plain `cargo build`, or hashing off) says nothing about its content, so it is served
//!   `no-cache` and revalidated (`If-Modified-Since` → `304`): an old wasm against a new server
//!   fails to hydrate, which a heuristic cache would otherwise cause.

use axum::extract::{Request, State};
use axum::http::header::{HeaderValue, CACHE_CONTROL};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;
use leptos::prelude::LeptosOptions;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tower_http::compression::{CompressionLayer, CompressionLevel};
use tower_http::services::ServeDir;

/// A year: the longest lifetime caches honour, for files whose name changes with their content.
const IMMUTABLE: &str = "public, max-age=31536000, immutable";
/// Revalidate every time: the name says nothing about the content.
const REVALIDATE: &str = "no-cache";

/// How hard pages and JSON are compressed on the fly: zstd's and gzip's fast levels and brotli's
/// 3. Every server-rendered page and every live refetch of 200 open tabs pays it on the
/// server's CPU; measured on the Failures page (85 KB of HTML, BENCHMARKS.md), the default
/// levels cost more than rendering it (brotli 4: ~1 ms), for bodies of a few KB either way.
pub const ON_THE_FLY_LEVEL: CompressionLevel = CompressionLevel::Precise(3);

/// zstd, brotli or gzip for every response the default predicate allows, in that preference
/// when the browser accepts several (current Chromium and Firefox send zstd; it compresses as
/// well as brotli at a fraction of its time).
pub fn compression() -> CompressionLayer {
    CompressionLayer::new().zstd(true).br(true).gzip(true).quality(ON_THE_FLY_LEVEL)
}

/// The URL prefix the bundle is served under (`site-pkg-dir`), with slashes: `/pkg/`.
pub fn bundle_prefix(options: &LeptosOptions) -> String {
    format!("/{}/", options.site_pkg_dir.trim_matches('/'))
}

/// The bundle's file service: the site's pkg directory, sending a precompressed `.br` or `.gz`
/// when one is beside the file and the browser accepts it, and answering conditional requests.
pub fn bundle_files(options: &LeptosOptions) -> ServeDir {
    let dir = Path::new(&*options.site_root).join(options.site_pkg_dir.trim_matches('/'));
    ServeDir::new(dir).precompressed_br().precompressed_gzip()
}

/// Which requests are for the bundle and what its content-hashed names look like.
#[derive(Clone)]
pub struct BundleCache {
    prefix: Arc<str>,
}

impl BundleCache {
    pub fn new(options: &LeptosOptions) -> Self {
        Self { prefix: bundle_prefix(options).into() }
    }
}

/// Sets how long a bundle response may be cached: [`IMMUTABLE`] for a content-hashed name,
/// [`REVALIDATE`] for any other bundle file and for every bundle error (a 404 for a hashed name
/// must not be remembered for a year). Other responses are left as they are.
pub async fn bundle_cache_headers(
    State(cache): State<BundleCache>,
    request: Request,
    next: Next,
) -> Response {
    let hashed = request.uri().path().strip_prefix(&*cache.prefix).map(is_content_hashed);
    let mut response = next.run(request).await;
    if let Some(hashed) = hashed {
        let found = response.status().is_success() || response.status() == StatusCode::NOT_MODIFIED;
        let policy = if hashed && found { IMMUTABLE } else { REVALIDATE };
        response.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static(policy));
    }
    response
}

/// Whether `file` is a bundle file named by its content, as cargo-leptos `hash-files` names
/// every file it writes in the pkg directory: `<name>.<hash>.<js|wasm|css>` (the app's
/// `lastword.<hash>.wasm`, a page's chunk `split_<page>_<n>.<hash>.wasm`, the chunk loader
/// `__wasm_split.<hash>.js`), the hash an md5 in unpadded base64url (22 characters of
/// `A-Z a-z 0-9 - _`), and a page's pack `pack_<page>.<the loader's hash>.pack` (`crate::packs`).
/// Files in subdirectories (wasm-bindgen's `snippets/`, never hashed) and anything else are not.
pub fn is_content_hashed(file: &str) -> bool {
    let mut parts = file.split('.');
    let (Some(name), Some(hash), Some(ext), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    !name.is_empty()
        && !name.contains('/')
        && hash.len() == 22
        && hash.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        // cargo-leptos' placeholder in the chunk loader's name when files are not hashed.
        && hash != "______________________"
        && matches!(ext, "js" | "wasm" | "css" | "pack")
}

/// Pages are lazy routes (`app/src/app.rs`), so the wasm imports a chunk loader that only
/// `cargo leptos build --split` writes, with its `__wasm_split_manifest.json`. A bundle built
/// without the flag loads nothing in the browser: pages render on the server but never come
/// alive (no live updates, no actions), with no error but the browser console's. Said at start
/// instead. A site with no wasm at all (a server-only build) is not a problem of this kind.
pub fn check_bundle_is_split(options: &LeptosOptions) -> Result<(), String> {
    let pkg = Path::new(&*options.site_root).join(options.site_pkg_dir.trim_matches('/'));
    let Ok(entries) = std::fs::read_dir(&pkg) else { return Ok(()) };
    let names: Vec<String> =
        entries.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    let has_wasm = names.iter().any(|n| n.ends_with(".wasm"));
    let split = names.iter().any(|n| n.starts_with("__wasm_split_manifest") && n.ends_with(".json"));
    if has_wasm && !split {
        return Err(format!(
            "the browser bundle in {} was built without --split: pages will render but not hydrate \
             (no live updates, no actions); rebuild it with `cargo leptos build --split` \
             (add --release --precompress for production)",
            pkg.display()
        ));
    }
    Ok(())
}

/// Where cargo-leptos writes `hash.txt` and where leptos reads it when rendering the page's
/// `<link>` and `<script>` tags: beside the running binary.
pub fn hash_file_beside_binary(options: &LeptosOptions) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    Some(exe.parent()?.join(&*options.hash_file))
}

/// Whether pages should name the content-hashed bundle: `hash_file` (cargo-leptos's
/// `hash.txt`: lines `js: <hash>`, `wasm: <hash>`, `css: <hash>`) exists and every file it names
/// is in the site. A hash file naming files the site does not hold (a binary from one build
/// beside a site from another) is reported and ignored, so the page names the plain files if
/// those are there, instead of files that are certainly missing.
pub fn use_hashed_names(options: &LeptosOptions, hash_file: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(hash_file) else {
        return false;
    };
    let pkg = Path::new(&*options.site_root).join(options.site_pkg_dir.trim_matches('/'));
    let mut named = 0;
    for line in text.lines() {
        let Some((ext, hash)) = line.split_once(':') else { continue };
        let (ext, hash) = (ext.trim(), hash.trim());
        if !matches!(ext, "js" | "wasm" | "css") {
            continue;
        }
        let file = pkg.join(format!("{}.{hash}.{ext}", options.output_name));
        if !file.is_file() {
            tracing::warn!(
                hash_file = %hash_file.display(),
                missing = %file.display(),
                "the hash file names a bundle file the site does not hold (a binary and a site from different builds?); pages will name the unhashed files"
            );
            return false;
        }
        named += 1;
    }
    named == 3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_cargo_leptos_hashed_bundle_names_count_as_content_hashed() {
        let hash = "AbCdEfGhIjKlMnOpQr-_01";
        assert_eq!(hash.len(), 22);
        for ext in ["js", "wasm", "css"] {
            assert!(is_content_hashed(&format!("lastword.{hash}.{ext}")), "{ext}");
        }
        // `cargo leptos build --split`: a page's chunk, a chunk shared by pages, the loader.
        for chunk in [
            format!("split_overview_view_123.{hash}.wasm"),
            format!("chunk_2.{hash}.wasm"),
            format!("__wasm_split.{hash}.js"),
            // The server's pack of a page's chunks, named with the loader's hash.
            format!("pack_task.{hash}.pack"),
        ] {
            assert!(is_content_hashed(&chunk), "{chunk}");
        }
        for plain in [
            "lastword.js",
            "lastword.wasm",
            "lastword_bg.wasm",
            "lastword.css",
            "__wasm_split.______________________.js",
            "pack_task.______________________.pack",
            "__wasm_split_manifest.AbCdEfGhIjKlMnOpQr-_01.json",
            ".AbCdEfGhIjKlMnOpQr-_01.js",
            "lastword.AbCdEfGhIjKlMnOpQr-_0.js",
            "lastword.AbCdEfGhIjKlMnOpQr-_012.js",
            "lastword.AbCdEfGhIjKlMnOpQr+_01.js",
            "lastword.AbCdEfGhIjKlMnOpQr-_01.html",
            "lastword.AbCdEfGhIjKlMnOpQr-_01.wasm.br",
            "sub/lastword.AbCdEfGhIjKlMnOpQr-_01.js",
            "snippets/x/inline0.AbCdEfGhIjKlMnOpQr-_01.js",
        ] {
            assert!(!is_content_hashed(plain), "{plain}");
        }
    }

    #[test]
    fn a_bundle_without_its_split_manifest_is_reported() {
        let site = tempfile::tempdir().unwrap();
        let options = LeptosOptions::builder()
            .output_name("lastword")
            .site_root(site.path().to_string_lossy().to_string())
            .build();
        assert_eq!(check_bundle_is_split(&options), Ok(()), "no site at all: a server-only build");
        let pkg = site.path().join("pkg");
        std::fs::create_dir_all(&pkg).unwrap();
        std::fs::write(pkg.join("lastword.css"), "x").unwrap();
        assert_eq!(check_bundle_is_split(&options), Ok(()), "no wasm");
        std::fs::write(pkg.join("lastword.wasm"), "x").unwrap();
        let problem = check_bundle_is_split(&options).unwrap_err();
        assert!(problem.contains("--split"), "{problem}");
        std::fs::write(pkg.join("__wasm_split_manifest.AbCdEfGhIjKlMnOpQr-_01.json"), "{}").unwrap();
        assert_eq!(check_bundle_is_split(&options), Ok(()));
    }

    #[test]
    fn hashed_names_are_used_only_when_the_site_holds_every_named_file() {
        let site = tempfile::tempdir().unwrap();
        let pkg = site.path().join("pkg");
        std::fs::create_dir_all(&pkg).unwrap();
        let options = LeptosOptions::builder()
            .output_name("lastword")
            .site_root(site.path().to_string_lossy().to_string())
            .build();
        let hash_file = site.path().join("hash.txt");
        assert!(!use_hashed_names(&options, &hash_file), "no hash file");

        std::fs::write(&hash_file, "js: J\nwasm: W\ncss: C\n").unwrap();
        assert!(!use_hashed_names(&options, &hash_file), "the hash file names files the site does not hold");

        for name in ["lastword.J.js", "lastword.W.wasm"] {
            std::fs::write(pkg.join(name), "x").unwrap();
        }
        assert!(!use_hashed_names(&options, &hash_file), "the css is missing");
        std::fs::write(pkg.join("lastword.C.css"), "x").unwrap();
        assert!(use_hashed_names(&options, &hash_file));
    }
}
