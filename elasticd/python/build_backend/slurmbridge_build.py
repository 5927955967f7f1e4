"""A PEP 517 build backend for slurmbridge_elastic from the standard library alone.

pip builds a wheel in an isolated environment into which it would download the build
requirements (setuptools) from an index: a site without network access could not install the
helper. This backend needs nothing: it zips the one package with its metadata (a PEP 427
wheel with a RECORD). Name, version and description come from pyproject.toml's [project].
"""
import base64
import hashlib
import os
import re
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "slurmbridge_elastic"


def _project():
    with open(os.path.join(ROOT, "pyproject.toml")) as f:
        text = f.read()
    section = text.split("[project]", 1)[1].split("\n[", 1)[0]
    fields = dict(re.findall(r'^(\w[\w-]*)\s*=\s*"([^"]*)"', section, re.M))
    return fields["name"], fields["version"], fields.get("description", ""), fields.get("requires-python", "")


def _dist(name):
    return re.sub(r"[-_.]+", "_", name)


def _metadata():
    name, version, description, requires = _project()
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}", f"Summary: {description}"]
    if requires:
        lines.append(f"Requires-Python: {requires}")
    return "\n".join(lines) + "\n"


WHEEL = "Wheel-Version: 1.0\nGenerator: slurmbridge_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def _files():
    """(path in the wheel, content) of the package's Python files, in a stable order."""
    out = []
    for directory, dirs, names in os.walk(os.path.join(ROOT, PACKAGE)):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for n in sorted(names):
            if n.endswith(".py"):
                path = os.path.join(directory, n)
                with open(path, "rb") as f:
                    out.append((os.path.relpath(path, ROOT).replace(os.sep, "/"), f.read()))
    return out


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    name, version, _, _ = _project()
    info = f"{_dist(name)}-{version}.dist-info"
    os.makedirs(os.path.join(metadata_directory, info), exist_ok=True)
    for fname, content in (("METADATA", _metadata()), ("WHEEL", WHEEL)):
        with open(os.path.join(metadata_directory, info, fname), "w") as f:
            f.write(content)
    return info


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    name, version, _, _ = _project()
    info = f"{_dist(name)}-{version}.dist-info"
    wheel = f"{_dist(name)}-{version}-py3-none-any.whl"
    files = _files() + [(f"{info}/METADATA", _metadata().encode()), (f"{info}/WHEEL", WHEEL.encode())]
    record = [_record_line(p, d) for p, d in files] + [f"{info}/RECORD,,"]
    files.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode()))
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files:
            info_ = zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0))
            info_.external_attr = 0o644 << 16
            info_.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info_, data)
    return wheel


def build_sdist(sdist_directory, config_settings=None):
    import tarfile

    name, version, _, _ = _project()
    base = f"{_dist(name)}-{version}"
    path = os.path.join(sdist_directory, base + ".tar.gz")
    with tarfile.open(path, "w:gz") as t:
        for rel in ["pyproject.toml", "build_backend/slurmbridge_build.py"] + [p for p, _ in _files()]:
            t.add(os.path.join(ROOT, rel), arcname=f"{base}/{rel}")
        pkg_info = os.path.join(sdist_directory, "PKG-INFO")
        with open(pkg_info, "w") as f:
            f.write(_metadata())
        t.add(pkg_info, arcname=f"{base}/PKG-INFO")
        os.unlink(pkg_info)
    return os.path.basename(path)
