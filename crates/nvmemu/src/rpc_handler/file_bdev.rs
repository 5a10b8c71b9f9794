// SPDX-License-Identifier: Apache-2.0
//! SPDK's file bdevs over RPC (`bdev_aio_create` / `bdev_aio_delete`, `bdev_uring_create` /
//! `bdev_uring_delete`): a regular file or a block device behind a bdev, whose I/O the
//! controllers run through their io_uring. The file must exist (SPDK does not create it
//! either); its size gives the block count.

use std::path::Path;

use nvmemu_bdev::{Bdev, BdevKind, FileEngine};
use nvmemu_device::Target;
use nvmemu_rpc::methods::file_bdev::{BdevAioCreateParams, BdevUringCreateParams};
use nvmemu_rpc::{Errno, RpcError};
use serde_json::{Value, json};

use super::State;
use super::bdev::BdevEntry;

/// What a create asks for, whichever method it came by.
struct FileRequest<'a> {
    engine: FileEngine,
    filename: &'a str,
    name: &'a str,
    block_size: Option<u32>,
    readonly: bool,
    uuid: Option<&'a str>,
}

/// `bdev_aio_create`.
pub(crate) fn aio_create(st: &mut State, p: &BdevAioCreateParams) -> Result<Value, RpcError> {
    create(
        st,
        &FileRequest {
            engine: FileEngine::Aio,
            filename: &p.filename,
            name: &p.name,
            block_size: p.block_size,
            readonly: p.readonly.unwrap_or(false),
            uuid: p.uuid.as_deref(),
        },
    )
}

/// `bdev_uring_create`.
pub(crate) fn uring_create(st: &mut State, p: &BdevUringCreateParams) -> Result<Value, RpcError> {
    create(
        st,
        &FileRequest {
            engine: FileEngine::Uring,
            filename: &p.filename,
            name: &p.name,
            block_size: p.block_size,
            readonly: false,
            uuid: p.uuid.as_deref(),
        },
    )
}

/// Opens the file and registers the bdev. SPDK's answers: a block size that is not a
/// power of two from 512 up is EINVAL, a file that cannot be opened its errno (ENOENT for
/// a missing one), a taken name EEXIST.
fn create(st: &mut State, r: &FileRequest<'_>) -> Result<Value, RpcError> {
    if let Some(bs) = r.block_size.filter(|&b| b != 0)
        && (bs < 512 || !bs.is_power_of_two())
    {
        return Err(RpcError::errno_msg(
            Errno::EINVAL,
            format!("Invalid block size {bs}: use a power of two from 512 to 65536"),
        ));
    }
    st.bdevs.check_new(r.name, r.uuid)?;
    let path = Path::new(r.filename);
    let bdev = Bdev::open_file(r.name, path, r.block_size, r.readonly, r.engine).map_err(|e| {
        let errno = e.errno().unwrap_or(Errno::EINVAL.0);
        let why = std::io::Error::from_raw_os_error(errno);
        RpcError::errno_msg(
            Errno(errno),
            format!("Unable to create bdev {} on {}: {why}", r.name, r.filename),
        )
    })?;
    let name = st.bdevs.add_built(bdev, r.uuid)?;
    st.log.notify("bdev_register", &name);
    Ok(Value::String(name))
}

/// `bdev_aio_delete` / `bdev_uring_delete`: as any bdev delete (its namespaces go first);
/// a bdev of another kind is ENODEV.
pub(crate) fn delete(
    st: &mut State,
    target: &Target,
    engine: FileEngine,
    name: &str,
) -> Result<Value, RpcError> {
    super::delete_bdev(st, target, BdevKind::File(engine), name)
}

/// The `save_config` call that opens the file of `e` again.
pub(crate) fn create_call(name: &str, e: &BdevEntry, engine: FileEngine) -> Value {
    let b = &e.bdev;
    let filename = b.file().map(|f| f.path().display().to_string());
    match engine {
        FileEngine::Aio => json!({"method": "bdev_aio_create", "params": {
            "name": name, "filename": filename, "block_size": b.block_size(),
            "readonly": b.file().is_some_and(|f| f.is_readonly()), "fallocate": true,
            "uuid": e.uuid}}),
        FileEngine::Uring => json!({"method": "bdev_uring_create", "params": {
            "name": name, "filename": filename, "block_size": b.block_size(),
            "uuid": e.uuid}}),
    }
}

/// `driver_specific` of a file bdev in `bdev_get_bdevs`, as SPDK shows it (`"aio"` or
/// `"uring"` with the file name), plus whether `O_DIRECT` is in use.
pub(crate) fn describe(e: &BdevEntry, map: &mut serde_json::Map<String, Value>) {
    let (BdevKind::File(engine), Some(f)) = (e.bdev.kind(), e.bdev.file()) else {
        return;
    };
    let filename = f.path().display().to_string();
    let (key, value) = match engine {
        FileEngine::Aio => (
            "aio",
            json!({"filename": filename, "block_size_override": true,
                   "readonly": f.is_readonly(), "fallocate": true, "direct": f.is_direct()}),
        ),
        FileEngine::Uring => (
            "uring",
            json!({"filename": filename, "direct": f.is_direct()}),
        ),
    };
    map.insert(key.into(), value);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::tests::{bdev, call, code, handler, saved_bdev_methods};

    #[test]
    fn aio_and_uring_bdevs_open_files_show_and_save_as_spdk_does() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("disk.img");
        std::fs::File::create(&path)
            .unwrap()
            .set_len(1 << 20)
            .unwrap();
        let file = path.display().to_string();
        let (h, _stop) = handler();
        let missing =
            json!({"name": "a0", "filename": dir.path().join("none").display().to_string()});
        assert_eq!(code(call(&h, "bdev_aio_create", missing)), -2);
        let odd = json!({"name": "a0", "filename": file, "block_size": 1000});
        assert_eq!(code(call(&h, "bdev_aio_create", odd)), -22);
        let aio = json!({"name": "a0", "filename": file, "block_size": 4096});
        assert_eq!(call(&h, "bdev_aio_create", aio.clone()), Ok(json!("a0")));
        assert_eq!(code(call(&h, "bdev_aio_create", aio)), -17);
        let a = bdev(&h, "a0");
        assert_eq!(a["product_name"], json!("AIO disk"));
        assert_eq!(
            (a["block_size"].clone(), a["num_blocks"].clone()),
            (json!(4096), json!(256))
        );
        assert_eq!(a["driver_specific"]["aio"]["filename"], json!(file));
        let uring = json!({"name": "u0", "filename": file});
        assert_eq!(call(&h, "bdev_uring_create", uring), Ok(json!("u0")));
        let u = bdev(&h, "u0");
        assert_eq!(
            (u["product_name"].clone(), u["num_blocks"].clone()),
            (json!("URING bdev"), json!(2048))
        );
        let saved = call(&h, "save_config", json!({})).unwrap();
        assert_eq!(
            saved_bdev_methods(&saved),
            [
                "bdev_aio_create",
                "bdev_uring_create",
                "bdev_wait_for_examine"
            ]
        );
        let (h2, _stop2) = handler();
        let report = nvmemu_rpc::load_config(&h2, &saved).unwrap();
        assert!(report.skipped.is_empty(), "{:?}", report.skipped);
        assert_eq!(bdev(&h2, "a0"), a);
        // The delete of the other kind does not take it.
        assert_eq!(
            code(call(&h, "bdev_uring_delete", json!({"name": "a0"}))),
            -19
        );
        assert_eq!(
            call(&h, "bdev_aio_delete", json!({"name": "a0"})),
            Ok(json!(true))
        );
        assert_eq!(
            call(&h, "bdev_uring_delete", json!({"name": "u0"})),
            Ok(json!(true))
        );
        assert_eq!(code(call(&h, "bdev_get_bdevs", json!({"name": "u0"}))), -19);
    }
}
