//! A first visit downloads the opened page's wasm chunks as one compressed file, a *pack*.
//!
//! `cargo leptos build --split` cuts the wasm into the shell and about 100 chunks: one per page
//! and one per set of pages sharing code, so a page needs 13 to 59 of them (docs/bundle-size.md).
//! Each chunk compressed alone loses what brotli would have found in the others: the task
//! page's chunks are 191 KB brotli one by one and 138 KB as one stream, and 51 requests are 51
//! round trips' worth of queueing on a slow link. So the server packs each page's chunks into
//! one file (built once per process, in the background, at brotli's best level for a release
//! bundle), the page's HTML preloads that file instead of the chunks (`app::app::ChunkPacks`),
//! and the chunk loader takes a chunk from the pack when the pack holds it, from its own URL
//! otherwise (a chunk of a page navigated to later, or a pack that failed to arrive).
//!
//! The chunk loader is cargo-leptos' generated `__wasm_split.<hash>.js`; the server serves it
//! with its `fetch(new URL("./<chunk>.wasm", …))` calls routed through [`LOADER_PRELUDE`]. A
//! loader that no longer has that shape is served as built and pages name their chunks as
//! before: packs are an optimisation, never a requirement.
//!
//! A pack is `LWPK`, a little-endian `u32` count, then per chunk a `u32` name length, the name
//! ([`chunk_name`]: `chunk_9`), a `u32` body length and the body; the largest chunk first.
//!
//! A release bundle's brotli forms (about 4 s of one core for the eight packs) are kept beside
//! the bundle as `<file>.lastword-cache.br` once made, so a restarted server (a deploy, a crash,
//! the benchmark's phases) reads them instead of compressing again beside the runners it
//! watches: with them made at every start, a runner's heartbeat loop ran at 0.8 of its speed
//! for the seconds the compression took (bench/src/writes.rs, 2026-12-07). A cached form is
//! used only if it decompresses to exactly the file; a bundle directory the server may not
//! write to just means compressing at every start, as before.

use crate::assets;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header::{HeaderValue, ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_TYPE, VARY};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use leptos::prelude::LeptosOptions;
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, OnceLock};

/// What the served chunk loader starts with: `__lwFetch` answers a chunk's fetch from the pack
/// the page preloads (the one `<link rel="preload">` whose URL ends in `.pack`), or fetches it.
pub const LOADER_PRELUDE: &str = r#"// lastword: a page's chunks arrive in one pack (server/src/packs.rs).
let __lwPacked;
function __lwPack() {
    if (__lwPacked === undefined) {
        const link = document.querySelector('link[rel="preload"][href$=".pack"]');
        __lwPacked = !link ? Promise.resolve(new Map()) : fetch(link.href)
            .then((r) => (r.ok ? r.arrayBuffer() : Promise.reject(new Error(`pack: ${r.status}`))))
            .then((buffer) => {
                const view = new DataView(buffer);
                const files = new Map();
                if (new TextDecoder().decode(new Uint8Array(buffer, 0, 4)) !== "LWPK") return files;
                let at = 4;
                const count = view.getUint32(at, true); at += 4;
                for (let i = 0; i < count; i++) {
                    const nameLength = view.getUint32(at, true); at += 4;
                    const name = new TextDecoder().decode(new Uint8Array(buffer, at, nameLength)); at += nameLength;
                    const length = view.getUint32(at, true); at += 4;
                    files.set(name, new Uint8Array(buffer, at, length)); at += length;
                }
                return files;
            })
            .catch((e) => { console.warn("lastword: the page's pack did not arrive; fetching its chunks one by one", e); return new Map(); });
    }
    return __lwPacked;
}
async function __lwFetch(url) {
    const file = url.pathname.slice(url.pathname.lastIndexOf("/") + 1);
    const name = file.slice(0, file.indexOf(".") < 0 ? file.length : file.indexOf("."));
    const files = await __lwPack();
    const body = files.get(name);
    if (body === undefined) return fetch(url);
    files.delete(name);
    return new Response(body, { headers: { "Content-Type": "application/wasm" } });
}
"#;

/// What a brotli form kept between runs adds to its file's name ([`Served::cached_in`]).
const BR_CACHE_SUFFIX: &str = ".lastword-cache.br";

/// Keeps `br` at `path` for the next start, written whole under another name and renamed, so
/// servers sharing a bundle never read half a file; best effort (a read-only bundle is fine).
fn write_br_cache(path: &Path, br: &[u8]) {
    let temporary = path.with_extension(format!("tmp{}", std::process::id()));
    let written = std::fs::write(&temporary, br).and_then(|()| std::fs::rename(&temporary, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temporary);
        tracing::debug!(path = %path.display(), error = %e, "page pack: brotli not kept for the next start");
    }
}

/// The call the generated loader makes for every chunk, and what it becomes.
const CHUNK_FETCH: &str = "fetch(new URL(\"./";
const PACKED_FETCH: &str = "__lwFetch(new URL(\"./";

/// A file served from memory in each encoding a browser may ask for. Brotli is made (or read
/// from its cache file) by the background thread right after start
/// ([`ChunkPacks::compress_in_background`]) and gzip on first need; each once (later askers of
/// one being made wait for it).
struct Served {
    content_type: &'static str,
    identity: Bytes,
    quality: Quality,
    br: OnceLock<Bytes>,
    gzip: OnceLock<Bytes>,
    /// Where the brotli form is kept between runs (release bundles only).
    br_cache: Option<PathBuf>,
}

#[derive(Clone, Copy)]
enum Quality {
    /// A release bundle (precompressed by cargo-leptos): brotli 11, gzip 9, as its own files.
    Best,
    /// A debug bundle (megabytes of unoptimised wasm per page): fast levels.
    Fast,
}

impl Served {
    fn new(content_type: &'static str, identity: Vec<u8>, quality: Quality) -> Self {
        Served {
            content_type,
            identity: identity.into(),
            quality,
            br: OnceLock::new(),
            gzip: OnceLock::new(),
            br_cache: None,
        }
    }

    /// The same, its brotli form kept in `dir` under `name` + [`BR_CACHE_SUFFIX`].
    fn cached_in(self, dir: &Path, name: &str) -> Self {
        Served { br_cache: Some(dir.join(format!("{name}{BR_CACHE_SUFFIX}"))), ..self }
    }

    fn br(&self) -> &Bytes {
        self.br.get_or_init(|| {
            if let Some(cached) = self.br_cache.as_deref().and_then(|path| self.read_br_cache(path)) {
                return cached;
            }
            let (level, window) = match self.quality {
                Quality::Best => (11, 24),
                Quality::Fast => (4, 22),
            };
            let mut out = brotli::CompressorWriter::new(Vec::new(), 64 * 1024, level, window);
            out.write_all(&self.identity).expect("writing to memory");
            let made: Bytes = out.into_inner().into();
            if let Some(path) = &self.br_cache {
                write_br_cache(path, &made);
            }
            made
        })
    }

    /// The cached brotli form at `path` if there is one and it decompresses to exactly this
    /// file (a few milliseconds; anything else — another build's file, a torn write — is
    /// made again).
    fn read_br_cache(&self, path: &Path) -> Option<Bytes> {
        let cached = std::fs::read(path).ok()?;
        let mut unpacked = Vec::with_capacity(self.identity.len());
        brotli::BrotliDecompress(&mut &cached[..], &mut unpacked).ok()?;
        (unpacked == self.identity).then(|| cached.into())
    }

    /// The body and its `Content-Encoding` for a request taking brotli and/or gzip. Brotli at its
    /// best level takes a second or two per pack; a request arriving before the background
    /// thread has made it gets gzip (tens of milliseconds; a few KB more) rather than waiting,
    /// unless brotli is all it takes.
    fn encoded(&self, takes_br: bool, takes_gzip: bool) -> (Bytes, Option<&'static str>) {
        match (takes_br, takes_gzip) {
            (true, _) if self.br.get().is_some() => (self.br().clone(), Some("br")),
            (_, true) => (self.gzip().clone(), Some("gzip")),
            (true, false) => (self.br().clone(), Some("br")),
            (false, false) => (self.identity.clone(), None),
        }
    }

    fn gzip(&self) -> &Bytes {
        self.gzip.get_or_init(|| {
            let level = match self.quality {
                Quality::Best => flate2::Compression::best(),
                Quality::Fast => flate2::Compression::fast(),
            };
            let mut out = flate2::write::GzEncoder::new(Vec::new(), level);
            out.write_all(&self.identity).expect("writing to memory");
            out.finish().expect("writing to memory").into()
        })
    }
}

/// The chunk loader as served and every page's pack, for one site.
pub struct ChunkPacks {
    /// The URL prefix of the bundle, `/pkg/`.
    prefix: String,
    /// The loader's file name, and the loader with its fetches routed through the packs.
    loader: (String, Served),
    /// Pack file name → pack.
    packs: BTreeMap<String, Arc<Served>>,
    /// Route (`task`, `failures`, …) → its pack's file name.
    by_route: HashMap<String, String>,
}

impl ChunkPacks {
    /// The packs of the site `options` describes, read once per process (tests build many
    /// routers over one site), or `None` when the site has no split bundle or a loader of an
    /// unknown shape. The chunks are read now; compression happens in the background.
    pub fn of_site(options: &LeptosOptions) -> Option<Arc<ChunkPacks>> {
        static SITES: LazyLock<Mutex<HashMap<PathBuf, Option<Arc<ChunkPacks>>>>> =
            LazyLock::new(Default::default);
        let pkg = Path::new(&*options.site_root).join(options.site_pkg_dir.trim_matches('/'));
        let mut sites = SITES.lock().unwrap_or_else(|e| e.into_inner());
        sites
            .entry(pkg.clone())
            .or_insert_with(|| {
                let names = split_file_names(options);
                match ChunkPacks::read(&pkg, &assets::bundle_prefix(options), &names) {
                    Ok(packs) => {
                        let packs = Arc::new(packs);
                        packs.compress_in_background();
                        Some(packs)
                    }
                    Err(why) => {
                        tracing::info!(pkg = %pkg.display(), "pages name their wasm chunks one by one: {why}");
                        None
                    }
                }
            })
            .clone()
    }

    /// Reads the manifest, the loader and every chunk under `pkg`.
    fn read(pkg: &Path, prefix: &str, names: &SplitFileNames) -> Result<ChunkPacks, String> {
        let manifest = std::fs::read_to_string(pkg.join(&names.manifest))
            .map_err(|e| format!("no split manifest {} ({e})", names.manifest))?;
        let manifest: BTreeMap<String, Vec<String>> =
            serde_json::from_str(&manifest).map_err(|e| format!("{}: {e}", names.manifest))?;
        let loader = std::fs::read_to_string(pkg.join(&names.loader))
            .map_err(|e| format!("no chunk loader {} ({e})", names.loader))?;
        let routed = route_chunk_fetches(&loader)
            .ok_or_else(|| format!("the chunk loader {} fetches no chunk we recognise", names.loader))?;
        // A release bundle is precompressed beside each file; a debug one is not.
        let quality =
            if pkg.join(format!("{}.br", names.loader)).is_file() { Quality::Best } else { Quality::Fast };
        // Only brotli at its best level is worth keeping between runs.
        let cached = |served: Served, name: &str| match quality {
            Quality::Best => served.cached_in(pkg, name),
            Quality::Fast => served,
        };
        let mut packs = BTreeMap::new();
        let mut by_route = HashMap::new();
        for (key, modules) in &manifest {
            let Some(route) = route_of(key) else { continue };
            let mut files = Vec::with_capacity(modules.len());
            for module in modules {
                let file = format!("{module}.wasm");
                let body = std::fs::read(pkg.join(&file)).map_err(|e| format!("{file}: {e}"))?;
                files.push((chunk_name(module).to_string(), body));
            }
            // Largest first: brotli then finds more of the small chunks in what came before
            // (measured on the release build: 0.8 to 1.1 KB less per page than the manifest's order).
            files.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then_with(|| a.0.cmp(&b.0)));
            let file = format!("pack_{route}.{}.pack", names.hash);
            let served = cached(Served::new("application/octet-stream", pack(&files), quality), &file);
            packs.insert(file.clone(), Arc::new(served));
            by_route.insert(route.to_string(), file);
        }
        Ok(ChunkPacks {
            prefix: prefix.to_string(),
            loader: (
                names.loader.clone(),
                cached(Served::new("text/javascript", routed.into_bytes(), quality), &names.loader),
            ),
            packs,
            by_route,
        })
    }

    /// The file name of `route`'s pack (`task` → `pack_task.<hash>.pack`), for its page's HTML.
    pub fn pack_of(&self, route: &str) -> Option<&str> {
        self.by_route.get(route).map(String::as_str)
    }

    /// Compresses every pack with brotli on a thread of its own (about 4 s of one core for a
    /// release bundle's 8 packs, or milliseconds when an earlier start kept them), scheduled only
    /// when a core is otherwise idle: the server often shares its machine with the database and
    /// the runners it watches, and they come first. (Idle priority alone did not make it free:
    /// the runner's loops leave a core idle between round trips, and the compression filled
    /// those gaps.) Until a pack's brotli is ready its visitors get gzip ([`Served::encoded`]).
    fn compress_in_background(self: &Arc<Self>) {
        let packs = self.clone();
        let spawned = std::thread::Builder::new().name("lastword-packs".into()).spawn(move || {
            run_when_idle();
            let started = std::time::Instant::now();
            packs.loader.1.br();
            for pack in packs.packs.values() {
                pack.br();
            }
            tracing::info!(packs = packs.packs.len(), took = ?started.elapsed(), "page packs compressed");
        });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "could not start compressing page packs; they are compressed when first asked for");
        }
    }

    /// The loader or a pack, by the file name under the bundle prefix.
    fn file(&self, name: &str) -> Option<&Served> {
        if name == self.loader.0 {
            return Some(&self.loader.1);
        }
        self.packs.get(name).map(|p| &**p)
    }
}

/// Serves the chunk loader and the packs from memory; every other request passes on (to the
/// bundle's file service, for the rest of `/pkg/`).
pub async fn serve(State(packs): State<Option<Arc<ChunkPacks>>>, request: Request, next: Next) -> Response {
    let Some(packs) = packs else { return next.run(request).await };
    let name = request.uri().path().strip_prefix(packs.prefix.as_str()).map(str::to_string);
    let Some(name) = name.filter(|n| packs.file(n).is_some()) else { return next.run(request).await };
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    }
    let (want_br, want_gzip) = (accepts(&request, "br"), accepts(&request, "gzip"));
    let is_head = request.method() == Method::HEAD;
    let packs = packs.clone();
    // Compressing takes milliseconds (gzip) to a second or two (brotli, for a client taking
    // nothing else before the background thread made it): off the async workers.
    let answer = tokio::task::spawn_blocking(move || {
        let file = packs.file(&name).expect("checked above");
        let (body, coding) = file.encoded(want_br, want_gzip);
        (file.content_type, body, coding)
    })
    .await;
    let Ok((content_type, body, coding)) = answer else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "could not prepare the file").into_response();
    };
    let mut response = Response::new(if is_head { Body::empty() } else { Body::from(body.clone()) });
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(VARY, HeaderValue::from_static("accept-encoding"));
    headers.insert(axum::http::header::CONTENT_LENGTH, HeaderValue::from(body.len()));
    if let Some(coding) = coding {
        headers.insert(CONTENT_ENCODING, HeaderValue::from_static(coding));
    }
    response
}

/// Puts the calling thread in Linux's `SCHED_IDLE` class: it runs only on a core nothing else
/// wants. Elsewhere, or if refused, it runs as any thread (and says so).
fn run_when_idle() {
    #[cfg(target_os = "linux")]
    {
        use thread_priority::unix::{
            set_thread_priority_and_policy, thread_native_id, NormalThreadSchedulePolicy,
            ThreadSchedulePolicy,
        };
        let idle = ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Idle);
        if let Err(e) =
            set_thread_priority_and_policy(thread_native_id(), thread_priority::ThreadPriority::Min, idle)
        {
            tracing::info!(error = ?e, "page packs are compressed at normal priority");
        }
    }
}

/// Whether the request's `Accept-Encoding` takes `coding` (`br;q=0` refuses it).
fn accepts(request: &Request, coding: &str) -> bool {
    request.headers().get_all(ACCEPT_ENCODING).iter().filter_map(|v| v.to_str().ok()).any(|v| {
        v.split(',').any(|part| {
            let mut it = part.split(';');
            let name = it.next().unwrap_or("").trim();
            let refused = it.any(|p| p.replace(' ', "") == "q=0");
            name.eq_ignore_ascii_case(coding) && !refused
        })
    })
}

/// The loader with every chunk fetch routed through [`LOADER_PRELUDE`] and its comment lines
/// left out, or `None` if it makes no chunk fetch of the shape cargo-leptos writes.
pub fn route_chunk_fetches(loader: &str) -> Option<String> {
    if !loader.contains(CHUNK_FETCH) || loader.contains("__lwFetch") {
        return None;
    }
    let routed: Vec<&str> = loader.lines().filter(|line| !is_comment_line(line)).collect();
    Some(format!("{LOADER_PRELUDE}{}\n", routed.join("\n").replace(CHUNK_FETCH, PACKED_FETCH)))
}

/// A line that is one block comment and nothing else. The generated loader names, above each
/// chunk, every page that uses it: a third of its text (measured: 71.0 KB raw, 5.2 KB brotli as
/// built; 46.4 and 4.5 without those lines), downloaded by every first visit and read by no one.
fn is_comment_line(line: &str) -> bool {
    let line = line.trim();
    line.starts_with("/*") && line.ends_with("*/") && line.find("*/") == Some(line.len() - 2)
}

/// `files` as one pack (the format is in the module's header).
pub fn pack(files: &[(String, Vec<u8>)]) -> Vec<u8> {
    let total: usize = files.iter().map(|(n, b)| 8 + n.len() + b.len()).sum();
    let mut out = Vec::with_capacity(8 + total);
    out.extend_from_slice(b"LWPK");
    out.extend_from_slice(&(files.len() as u32).to_le_bytes());
    for (name, body) in files {
        out.extend_from_slice(&(name.len() as u32).to_le_bytes());
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&(body.len() as u32).to_le_bytes());
        out.extend_from_slice(body);
    }
    out
}

/// A chunk's name in a pack: its file name up to the first dot (`chunk_9.<hash>.wasm` →
/// `chunk_9`), unique within a build, as the prelude reads it from the URL it is asked for. The
/// hashes would cost a kilobyte per pack (random text does not compress), and say nothing here:
/// a pack is named after the loader, so it always comes from the loader's build.
pub fn chunk_name(file: &str) -> &str {
    file.split_once('.').map_or(file, |(name, _)| name)
}

/// The route a manifest key belongs to: `__task_view_1809…` → `task` (`#[lazy_route]` names a
/// route's view `__<Route>_View`, and the manifest keys it in snake case with a hash).
pub fn route_of(key: &str) -> Option<&str> {
    let route = key.strip_prefix("__")?.split_once("_view_")?.0;
    (!route.is_empty() && route.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')).then_some(route)
}

/// The split manifest's and the chunk loader's file names, and the hash packs are named with:
/// as leptos finds them (`HydrationScripts`), from `hash.txt` beside the binary when the build
/// hashed its files (`manifest:` and `split:` lines), fixed names otherwise.
struct SplitFileNames {
    manifest: String,
    loader: String,
    hash: String,
}

fn split_file_names(options: &LeptosOptions) -> SplitFileNames {
    // cargo-leptos' placeholder where a hash would be: the names then say nothing about content.
    let unhashed = "______________________".to_string();
    let mut names = SplitFileNames {
        manifest: "__wasm_split_manifest.json".into(),
        loader: format!("__wasm_split.{unhashed}.js"),
        hash: unhashed,
    };
    if !options.hash_files {
        return names;
    }
    let text = assets::hash_file_beside_binary(options).and_then(|f| std::fs::read_to_string(f).ok());
    for line in text.as_deref().unwrap_or("").lines() {
        match line.split_once(':').map(|(k, v)| (k.trim(), v.trim())) {
            Some(("manifest", hash)) => names.manifest = format!("__wasm_split_manifest.{hash}.json"),
            Some(("split", hash)) => {
                names.loader = format!("__wasm_split.{hash}.js");
                // The loader names every chunk by its content hash, so its own hash changes
                // whenever any chunk does: a pack named with it is named by its content.
                names.hash = hash.to_string();
            }
            _ => {}
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunk_is_named_in_its_pack_without_its_hash() {
        assert_eq!(chunk_name("chunk_9.0briX3wqJ7GcUwl6rn0rDQ"), "chunk_9");
        assert_eq!(chunk_name("split___task_view_1.mtwTNB.wasm"), "split___task_view_1");
        assert_eq!(chunk_name("chunk_9"), "chunk_9");
    }

    #[test]
    fn a_route_is_read_from_its_manifest_key() {
        assert_eq!(route_of("__task_view_18099290585237159780"), Some("task"));
        assert_eq!(route_of("__lease_reports_view_1"), Some("lease_reports"));
        assert_eq!(route_of("__confirm_form_123"), None);
        assert_eq!(route_of("task_view_1"), None);
        assert_eq!(route_of("__../x_view_1"), None);
    }

    #[test]
    fn the_loader_fetches_every_chunk_through_the_pack() {
        let loader = "import { initSync } from \"./lastword.x.js\";\n\
            /* __audit_view_1, __failures_view_1 */\n\
            const __chunk_9 = makeLoad(() => {\n\
                const src = fetch(new URL(\"./chunk_9.abc.wasm\", import.meta.url));\n\
                return async (imports) => (WebAssembly.instantiateStreaming(src, imports));\n\
            }, []);\n\
            const __split = makeLoad(() => { const src = fetch(new URL(\"./split___task_view_1.def.wasm\", import.meta.url)); }, []);";
        let routed = route_chunk_fetches(loader).expect("a loader of the known shape");
        assert!(routed.starts_with(LOADER_PRELUDE));
        assert_eq!(routed.matches("__lwFetch(new URL(\"./").count(), 2);
        assert!(!routed[LOADER_PRELUDE.len()..].contains(" fetch(new URL"), "{routed}");
        assert!(!routed.contains("__audit_view_1"), "comment lines are left out: {routed}");
        assert!(routed.contains("const __chunk_9 = makeLoad(() => {\n"), "code lines stay whole: {routed}");
        // A loader of another shape, or one already routed, is left alone.
        assert_eq!(route_chunk_fetches("const src = fetchChunk(\"./chunk_9.wasm\");"), None);
        assert_eq!(route_chunk_fetches(&routed), None);
    }

    #[test]
    fn only_lines_that_are_one_comment_are_comment_lines() {
        assert!(is_comment_line("/* __audit_view_1, __task_view_2 */"));
        assert!(is_comment_line("   /* x */  "));
        assert!(!is_comment_line("/* a */ const b = 1; /* c */"));
        assert!(!is_comment_line("const a = \"/* not a comment */\";"));
        assert!(!is_comment_line("/* opens here"));
        assert!(!is_comment_line("}"));
    }

    #[test]
    fn a_pack_holds_each_file_whole_and_named() {
        let files =
            vec![("chunk_1.a.wasm".to_string(), vec![0, 97, 115, 109]), ("split_x.b.wasm".into(), vec![])];
        let packed = pack(&files);
        assert_eq!(&packed[..4], b"LWPK");
        // Read back as the browser's prelude reads it.
        let u32_at = |at: usize| u32::from_le_bytes(packed[at..at + 4].try_into().unwrap()) as usize;
        let mut at = 8;
        let mut read = vec![];
        for _ in 0..u32_at(4) {
            let name_len = u32_at(at);
            let name = String::from_utf8(packed[at + 4..at + 4 + name_len].to_vec()).unwrap();
            at += 4 + name_len;
            let len = u32_at(at);
            read.push((name, packed[at + 4..at + 4 + len].to_vec()));
            at += 4 + len;
        }
        assert_eq!(at, packed.len());
        assert_eq!(read, files);
    }

    #[test]
    fn a_request_before_brotli_is_ready_gets_gzip_rather_than_wait() {
        let body: Vec<u8> = (0..20_000u32).flat_map(|i| (i % 97).to_le_bytes()).collect();
        let served = Served::new("application/octet-stream", body.clone(), Quality::Fast);
        let coding = |br, gzip| served.encoded(br, gzip).1;
        assert_eq!(coding(true, true), Some("gzip"), "brotli not made yet");
        assert!(served.br.get().is_none(), "and the request did not make it");
        assert_eq!(coding(false, false), None);
        assert_eq!(served.encoded(false, false).0, body);
        // A client taking brotli alone waits for it; from then on every brotli taker gets it.
        assert_eq!(coding(true, false), Some("br"));
        assert_eq!(coding(true, true), Some("br"));
        assert_eq!(coding(false, true), Some("gzip"));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_background_thread_runs_only_on_an_idle_core() {
        use thread_priority::unix::{
            thread_schedule_policy, NormalThreadSchedulePolicy, ThreadSchedulePolicy,
        };
        let policy = std::thread::spawn(|| {
            run_when_idle();
            thread_schedule_policy()
        })
        .join()
        .unwrap();
        assert_eq!(policy.unwrap(), ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Idle));
        assert_ne!(
            thread_schedule_policy().unwrap(),
            ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Idle),
            "only the thread that asked"
        );
    }

    #[test]
    fn brotli_is_kept_for_the_next_start_and_used_only_if_it_is_this_file() {
        let dir = std::env::temp_dir().join(format!("lastword-packs-cache-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let body: Vec<u8> = (0..30_000u32).flat_map(|i| (i % 89).to_le_bytes()).collect();
        let served =
            || Served::new("application/octet-stream", body.clone(), Quality::Best).cached_in(&dir, "p.pack");
        let path = dir.join(format!("p.pack{BR_CACHE_SUFFIX}"));
        let made = served().br().clone();
        assert_eq!(std::fs::read(&path).unwrap(), made, "kept beside the bundle");
        // The next start reads it: a valid brotli form of the same file made at another level
        // (so distinguishable from what compressing again would give) is served as it is.
        let mut other = brotli::CompressorWriter::new(Vec::new(), 4096, 1, 22);
        other.write_all(&body).unwrap();
        let other = other.into_inner();
        assert_ne!(other, made[..]);
        std::fs::write(&path, &other).unwrap();
        assert_eq!(served().br()[..], other[..], "read, not made again");
        // Another file's brotli, or bytes that are not brotli, are not used: made again and kept.
        let mut stranger = brotli::CompressorWriter::new(Vec::new(), 4096, 1, 22);
        stranger.write_all(b"another build's pack").unwrap();
        for wrong in [stranger.into_inner(), b"torn".to_vec()] {
            std::fs::write(&path, &wrong).unwrap();
            assert_eq!(served().br(), &made);
            assert_eq!(std::fs::read(&path).unwrap(), made);
        }
        // A directory it may not write to: served all the same.
        let nowhere = Served::new("application/octet-stream", body.clone(), Quality::Best)
            .cached_in(&dir.join("missing"), "p.pack");
        assert_eq!(nowhere.br(), &made);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn compressed_forms_decompress_to_the_file() {
        let body: Vec<u8> = (0..50_000u32).flat_map(|i| (i % 251).to_le_bytes()).collect();
        for quality in [Quality::Fast, Quality::Best] {
            let served = Served::new("application/octet-stream", body.clone(), quality);
            let mut unbr = Vec::new();
            brotli::BrotliDecompress(&mut &served.br()[..], &mut unbr).unwrap();
            assert_eq!(unbr, body);
            let mut ungz = Vec::new();
            std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&served.gzip()[..]), &mut ungz)
                .unwrap();
            assert_eq!(ungz, body);
            assert!(served.br().len() < body.len() / 4, "brotli compresses");
        }
    }
}
