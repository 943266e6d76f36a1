//! The `torchdx` command (its code is the library's: `torchdx::main_from`).

fn main() -> std::process::ExitCode {
    let code = torchdx::main_from(std::env::args_os());
    std::process::ExitCode::from(u8::try_from(code).unwrap_or(2))
}
