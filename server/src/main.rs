//! The `lastword` binary: parse the command line, set up logging, hand over. Nothing else.

use clap::Parser;
use lastword_server::cli::Cli;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    lastword_server::telemetry::init(cli.global.log_format);
    match lastword_server::cli::run(cli).await {
        Ok(code) => code,
        Err(e) => {
            tracing::error!("{e:#}");
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
