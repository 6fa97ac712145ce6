"""The Import Report panel: what the ONNX importer made of the last model opened
(operators mapped, simplifications, inputs and outputs, weights)."""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtWidgets import QTextBrowser, QWidget

if TYPE_CHECKING:  # engine.frontends loads onnx: only when a model is opened
    from engine.frontends import ImportReport

EMPTY_TEXT = "Open an ONNX model (File → Open, or drop a .onnx file on the window) to see what the importer made of it."


def _shape(shape: list[int]) -> str:
    return "×".join(str(d) for d in shape) or "scalar"


def report_html(report: ImportReport, path: Path) -> str:
    """The report as rich text for a QTextBrowser (tables, since its HTML subset has no CSS grid)."""
    total = sum(report.ops_mapped.values())
    kind = "ONNX" if path.suffix.lower() == ".onnx" else "TensorFlow"  # the two model files the app opens
    parts = [
        f"<h3>{escape(path.name)}</h3>",
        f"<p>{report.stages} stages from {total} mapped {kind} node(s), imported in {report.seconds:.2f} s.</p>",
        f"<h4>Operators mapped ({len(report.ops_mapped)})</h4>",
        "<table cellspacing='0' cellpadding='2'>",
        *(f"<tr><td>{escape(op)}</td><td align='right'>&nbsp;×{n}</td></tr>" for op, n in report.ops_mapped.items()),
        "</table>",
        f"<h4>Simplifications ({len(report.simplifications)})</h4>",
    ]
    if report.simplifications:
        parts += ["<ul>", *(f"<li>{escape(s)}</li>" for s in report.simplifications), "</ul>"]
    else:
        parts.append("<p>None.</p>")
    for title, items in (("Inputs", report.inputs), ("Outputs", report.outputs)):
        parts += [f"<h4>{title}</h4>", "<ul>"]
        for io in items:
            onnx = f" (ONNX {escape(str(io['onnx']))})" if io.get("onnx") and io["onnx"] != io["name"] else ""
            parts.append(f"<li><b>{escape(str(io['name']))}</b>{onnx}: {_shape(io['shape'])}</li>")
        parts.append("</ul>")
    w = report.weights
    if w.get("arrays"):
        where = f"<br>{escape(str(w['path']))}" if w.get("path") else ""
        parts.append(f"<h4>Weights</h4><p>{w['arrays']} array(s), {w['bytes'] / 1e6:.2f} MB{where}</p>")
    return "\n".join(parts)


class ImportReportPanel(QTextBrowser):
    """Read-only; keeps the report object so tests and callers can read it back."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("import_report")
        self.setOpenLinks(False)
        self.report: ImportReport | None = None
        self.path: Path | None = None
        self.clear_report()

    def show_report(self, report: ImportReport, path: Path) -> None:
        self.report, self.path = report, path
        self.setHtml(report_html(report, path))

    def clear_report(self) -> None:
        self.report, self.path = None, None
        self.setPlainText(EMPTY_TEXT)
