"""``prepare`` end to end against archives in the official layouts served from a loopback HTTP server.

The corpus descriptions are the real ones (URLs, archive layout, SGML test sets); only the expected line counts
are shrunk to the small synthetic files served here, and the checksums are those of the served archives.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import sarnmt.data.corpora.fetch as fetch
from sarnmt.cli.prepare import format_report, prepare
from sarnmt.data.corpora.catalog import CORPORA
from sarnmt.data.corpora.fetch import FetchError, extract
from tests.conftest import CONF_DIR, compose_train

WORDS = 'the house of a new re-election vote is not what "they" said , but it\'s fine'.split()
WORDS_XX = "la casa del nuevo voto de re-elección no es lo que dijeron pero está bien".split()


def sentences(n: int, seed: int, words: list[str]) -> list[str]:
    out = []
    for k in range(n):
        length = 3 + (k * 7 + seed) % 9
        line = " ".join(words[(k * 3 + j * (seed + 1)) % len(words)] for j in range(length))
        out.append(line.capitalize().replace(" ,", ",") + ".")
    return out


def sgml(lines: list[str], lang: str, docs: tuple[int, ...] | None = None) -> str:
    docs = docs or (len(lines) // 2, len(lines) - len(lines) // 2)
    out, k = ['<srcset setid="newstest" srclang="any">'], 0
    for d, size in enumerate(docs):
        out.append(f'<doc sysid="ref" docid="doc{d}" genre="news" origlang="{lang}">')
        for _ in range(size):
            out.append(f'<seg id="{k + 1}">{lines[k]}</seg>')
            k += 1
        out.append("</doc>")
    return "\n".join([*out, "</srcset>"]) + "\n"


def tgz(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


class Mirror:
    """A loopback HTTP server with Range support; ``drop`` paths are cut off half-way on their first request."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files, self.requests, self.drop = files, [], set()
        mirror = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                path = self.path.lstrip("/")
                mirror.requests.append((path, self.headers.get("Range")))
                if path not in mirror.files:
                    self.send_error(404)
                    return
                data, start = mirror.files[path], 0
                if rng := self.headers.get("Range"):
                    start = int(rng.split("=")[1].split("-")[0])
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                else:
                    self.send_response(200)
                self.send_header("Content-Length", str(len(data) - start))
                self.end_headers()
                if path in mirror.drop:
                    mirror.drop.discard(path)
                    self.wfile.write(data[start : start + (len(data) - start) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(data[start:])

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def checksums(self, names: dict[str, str]) -> dict[str, str]:
        """``{download folder: "sha256:..."}`` for ``{download folder: served path}``."""
        return {name: "sha256:" + hashlib.sha256(self.files[path]).hexdigest() for name, path in names.items()}


def _shrink(monkeypatch, name: str, sizes: dict[str, int]) -> None:
    corpus = CORPORA[name]
    splits = {s: tuple(dataclasses.replace(p, lines=sizes[s]) for p in parts) for s, parts in corpus.splits.items()}
    monkeypatch.setitem(CORPORA, name, dataclasses.replace(corpus, splits=splits))


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch):
    monkeypatch.setattr(fetch.time, "sleep", lambda s: None)


def es_en_mirror() -> tuple[Mirror, dict[str, str]]:
    tr_es, tr_en = sentences(150, 1, WORDS_XX), sentences(150, 1, WORDS)
    nc_es, nc_en = sentences(60, 2, WORDS_XX), sentences(60, 2, WORDS)
    d_es, d_en, t_es, t_en = (sentences(10, s, w) for s, w in ((3, WORDS_XX), (3, WORDS), (4, WORDS_XX), (4, WORDS)))
    files = {
        "europarl/v7/es-en.tgz": tgz(
            {"europarl-v7.es-en.es": "\n".join(tr_es) + "\n", "europarl-v7.es-en.en": "\n".join(tr_en) + "\n"}
        ),
        "wmt13/training-parallel-nc-v8.tgz": tgz(
            {
                "training/news-commentary-v8.es-en.es": "\n".join(nc_es) + "\n",
                "training/news-commentary-v8.es-en.en": "\n".join(nc_en) + "\n",
            }
        ),
        "wmt12/test.tgz": tgz(
            {"test/newstest2012-src.es.sgm": sgml(d_es, "es"), "test/newstest2012-src.en.sgm": sgml(d_en, "es")}
        ),
        "wmt13/test.tgz": tgz(
            {"test/newstest2013-src.es.sgm": sgml(t_es, "es"), "test/newstest2013-src.en.sgm": sgml(t_en, "es")}
        ),
    }
    names = {
        "europarl-v7-es-en": "europarl/v7/es-en.tgz",
        "nc-v8": "wmt13/training-parallel-nc-v8.tgz",
        "wmt12-test": "wmt12/test.tgz",
        "wmt13-test": "wmt13/test.tgz",
    }
    return Mirror(files), names


def cfg_for(data: str, tmp_path: Path, mirror: Mirror | None, checksums: dict[str, str]) -> object:
    from hydra import compose, initialize_config_dir

    overrides = [
        f"data={data}",
        f"data.root={tmp_path / 'root'}",
        f"paths.cache_dir={tmp_path / 'cache'}",
        "data.vocab_size=300",
    ]
    if mirror is not None:
        overrides.append(f"data.url_base={mirror.url}")
    overrides += [f"+data.checksums.{k}='{v}'" for k, v in checksums.items()]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="prepare", overrides=overrides)


def test_prepare_es_en_fetches_verifies_caches_and_second_run_does_nothing(tmp_path, monkeypatch):
    _shrink(monkeypatch, "es_en", {"train": None, "val": 10, "test": 10})
    mirror, names = es_en_mirror()
    mirror.drop.add("europarl/v7/es-en.tgz")  # the first transfer breaks half-way: resumed with Range
    cfg = cfg_for("es_en", tmp_path, mirror, mirror.checksums(names))
    report = prepare(cfg)
    assert len(report["downloaded"]) == len(names) and not report["cached"]
    assert {s: i["pairs"] for s, i in report["splits"].items()} == {"train": 210, "val": 10, "test": 10}
    ranges = [r for p, r in mirror.requests if p == "europarl/v7/es-en.tgz"]
    assert ranges[0] is None and ranges[1] is not None and ranges[1].startswith("bytes=")
    cache = Path(report["cache"])
    assert (cache / "manifest.json").is_file() and (cache / "pipeline.json").is_file()
    assert "@-@" in (cache / "train.tgt.tok").read_text()
    assert "train: kept" in format_report(report)
    n_requests = len(mirror.requests)
    again = prepare(cfg)
    assert again["cached"] and again["downloaded"] == [] and again["cache"] == report["cache"]
    assert len(mirror.requests) == n_requests  # no download, no processing
    dm = cfg_datamodule(cfg)
    dm.setup("fit")
    ids = dm.dataset("val").tgt[0]
    assert dm.decode_target(ids) == dm.references("val")[0]
    assert dm.tokenized_references("val")[0] == dm.tgt_codec.tokenize(dm.references("val")[0])
    mirror.server.shutdown()


def nothing_cached(tmp_path: Path) -> bool:
    """No cache folder, finished or half-written, under the test's cache dir (lock files aside)."""
    prepared = tmp_path / "cache" / "prepared"
    return not prepared.exists() or all(p.name.endswith(".lock") for p in prepared.iterdir())


def cfg_datamodule(cfg):
    from hydra.utils import instantiate

    return instantiate(cfg.data)


def test_corrupted_archive_is_refused_with_instructions_and_nothing_cached(tmp_path, monkeypatch):
    _shrink(monkeypatch, "es_en", {"train": None, "val": 10, "test": 10})
    mirror, names = es_en_mirror()
    sums = mirror.checksums(names)
    sums["wmt13-test"] = "md5:" + "0" * 32
    with pytest.raises(FetchError) as err:
        prepare(cfg_for("es_en", tmp_path, mirror, sums))
    message = str(err.value)
    assert "by hand" in message and "wmt13/test.tgz" in message
    assert str(tmp_path / "root" / "downloads" / "wmt13-test.tgz") in message
    assert nothing_cached(tmp_path)
    assert sum(1 for p, _ in mirror.requests if p == "wmt13/test.tgz") == 3  # retried
    mirror.server.shutdown()


def test_prepare_en_de_with_extra_test_sets_and_misaligned_sgml(tmp_path, monkeypatch):
    _shrink(monkeypatch, "en_de", {"train": None, "val": 8, "test": 8, "test_nt2015": 8, "test_nt2016": 8})
    en, de = sentences(80, 5, WORDS), sentences(80, 5, WORDS_XX)
    txt = {"en": "\n".join(en) + "\n", "de": "\n".join(de) + "\n"}
    d = {lang: sentences(8, 6, w) for lang, w in (("en", WORDS), ("de", WORDS_XX))}
    files = {
        "europarl/v7/de-en.tgz": tgz({f"europarl-v7.de-en.{x}": txt[x] for x in ("en", "de")}),
        "wmt13/training-parallel-commoncrawl.tgz": tgz({f"commoncrawl.de-en.{x}": txt[x] for x in ("en", "de")}),
        "wmt16/translation-task/training-parallel-nc-v11.tgz": tgz(
            {f"training-parallel-nc-v11/news-commentary-v11.de-en.{x}": txt[x] for x in ("en", "de")}
        ),
        "wmt13/test.tgz": tgz({f"test/newstest2013-src.{x}.sgm": sgml(d[x], "en") for x in ("en", "de")}),
        "wmt14/test-full.tgz": tgz(
            {
                "test-full/newstest2014-deen-src.en.sgm": sgml(d["en"], "en"),
                "test-full/newstest2014-deen-ref.de.sgm": sgml(d["de"], "en", (3, 5)),
            }
        ),
        "wmt15/test.tgz": tgz(
            {
                "test/newstest2015-ende-src.en.sgm": sgml(d["en"], "en"),
                "test/newstest2015-ende-ref.de.sgm": sgml(d["de"], "en"),
            }
        ),
        "wmt16/translation-task/test.tgz": tgz(
            {
                "test/newstest2016-ende-src.en.sgm": sgml(d["en"], "en"),
                "test/newstest2016-ende-ref.de.sgm": sgml(d["de"], "en"),
            }
        ),
    }
    mirror = Mirror(files)
    names = {dl.folder: dl.url.split("://", 1)[1].split("/", 1)[1] for dl in CORPORA["en_de"].downloads}
    cfg = cfg_for("en_de", tmp_path, mirror, mirror.checksums(names))
    with pytest.raises(ValueError, match=r"misaligned in document 'doc0'.*4 segments.*3"):
        prepare(cfg)  # newstest2014's reference has 3+5 segments where the source has 4+4
    assert nothing_cached(tmp_path)
    (tmp_path / "root" / "wmt14-test-full" / "test-full" / "newstest2014-deen-ref.de.sgm").write_text(
        sgml(d["de"], "en")
    )
    report = prepare(cfg)
    assert set(report["splits"]) == {"train", "val", "test", "test_nt2015", "test_nt2016"}
    assert report["splits"]["train"]["pairs"] == 240 and report["downloaded"] == []  # all on disk already
    mirror.server.shutdown()


def test_prepare_en_zh_manual_download_error_then_local_files(tmp_path, monkeypatch):
    _shrink(monkeypatch, "en_zh", {"train": 40, "val": 5, "test": 5})
    cfg = cfg_for("en_zh", tmp_path, None, {})
    with pytest.raises(FetchError, match=r"no public direct download.*un-en-zh/\{train,dev,test\}"):
        prepare(cfg)
    folder = tmp_path / "root" / "un-en-zh"
    folder.mkdir(parents=True)
    zh = [
        "我们今天在北京开会。",
        "联合国大会通过了决议。",
        "这是一个新的问题。",
        "他说：“很好。”",
        "秘书长发表了讲话。",
    ]
    for split, n in (("train", 40), ("dev", 5), ("test", 5)):
        (folder / f"{split}.en").write_text("\n".join(sentences(n, 7, WORDS)) + "\n")
        (folder / f"{split}.zh").write_text("\n".join(zh[k % 5] for k in range(n)) + "\n")
    report = prepare(cfg)
    tok = (Path(report["cache"]) / "train.tgt.tok").read_text().splitlines()
    assert tok[0].replace(" ", "") == zh[0] and " " in tok[0]
    src_tok = (Path(report["cache"]) / "train.src.tok").read_text()
    assert src_tok == src_tok.lower() and "re-election" in src_tok  # lowercased, no @-@ splitting


def test_bad_utf8_and_line_count_errors_name_the_file(tmp_path, monkeypatch):
    _shrink(monkeypatch, "en_zh", {"train": 3, "val": 1, "test": 1})
    folder = tmp_path / "root" / "un-en-zh"
    folder.mkdir(parents=True)
    for split, n in (("train", 3), ("dev", 1), ("test", 1)):
        (folder / f"{split}.en").write_text("a b\n" * n)
        (folder / f"{split}.zh").write_text("好\n" * n)
    (folder / "train.zh").write_bytes(b"ok\n\xff\xfe bad\nok\n")
    cfg = cfg_for("en_zh", tmp_path, None, {})
    with pytest.raises(ValueError, match=r"train\.zh:2: invalid UTF-8"):
        prepare(cfg)
    (folder / "train.zh").write_text("好\n好\n")
    with pytest.raises(ValueError, match=r"train\.en has 3 lines.*train\.zh has 2 lines"):
        prepare(cfg)


def test_extract_refuses_paths_outside_the_target(tmp_path):
    evil = tmp_path / "evil.tgz"
    evil.write_bytes(tgz({"../outside.txt": "x"}))
    with pytest.raises(FetchError, match="outside"):
        extract(evil, tmp_path / "target")
    assert not (tmp_path / "outside.txt").exists() and not (tmp_path / "target").exists()


def test_train_config_composes_with_every_corpus():
    for name in ("es_en", "en_de", "en_zh", "multi30k_en_de", "mini_es_en", "mini_en_de", "mini_en_zh"):
        cfg = compose_train([f"data={name}"])
        assert cfg.data.corpus == name and cfg.data._target_.endswith("CorpusDataModule")


@pytest.mark.slow
def test_multi30k_datamodule_from_shared_data(shared_data, tmp_path):
    from hydra.utils import instantiate

    cfg = compose_train(["data=multi30k_en_de", f"data.root={shared_data}", f"paths.cache_dir={tmp_path}"])
    dm = instantiate(cfg.data)
    dm.prepare_data()
    dm.setup("fit")
    assert set(dm.splits()) == {"train", "val", "test", "test_2017", "test_2018", "test_mscoco2017"}
    assert dm.filter_stats["total"] == 29000 and dm.filter_stats["kept"] > 28000
    assert len(dm.references("test")) == 1000
    ref = dm.references("val")[0]
    assert dm.decode_target(dm.dataset("val").tgt[0]) == ref
