"""Page templating: every page links one local stylesheet and one local script (relative paths,
so the folder opens from disk), and nothing else is fetched."""
from __future__ import annotations

from html import escape

CSS = """body{font-family:sans-serif;margin:1.2em;color:#222}table{border-collapse:collapse;margin:.5em 0}
td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px}th{background:#f3f3f3;cursor:pointer}
.num{text-align:right}.warn{background:#fff3cd;border:1px solid #e0c060;padding:.4em .8em;margin:.4em 0}
.plots{display:flex;flex-wrap:wrap;gap:8px}img.thumb{max-width:320px;border:1px solid #ccc}
nav a{margin-right:1em}.zero{color:#b00}
.pair{display:flex;gap:8px;margin:4px 8px 4px 0}.frames{display:flex;flex-wrap:wrap;gap:4px 16px}
figure{margin:0}figcaption{font-size:12px}
pre.prompt{white-space:pre-wrap;background:#f7f7f7;border:1px solid #ddd;padding:.5em;max-width:60em;font-size:12px}"""

JS = """// Sort a table by a clicked header; filter rows of #cases by the filter inputs.
document.addEventListener('DOMContentLoaded',function(){
 document.querySelectorAll('table.sortable th').forEach(function(th,i){th.addEventListener('click',function(){
  var tb=th.closest('table').tBodies[0],rows=Array.from(tb.rows),asc=th.dataset.asc!=='1';th.dataset.asc=asc?'1':'0';
  rows.sort(function(a,b){var x=a.cells[i].dataset.v||a.cells[i].textContent,y=b.cells[i].dataset.v||b.cells[i].textContent;
   var nx=parseFloat(x),ny=parseFloat(y);var c=(!isNaN(nx)&&!isNaN(ny))?nx-ny:x.localeCompare(y);return asc?c:-c;});
  rows.forEach(function(r){tb.appendChild(r);});});});
 var f=document.querySelectorAll('.filter');function apply(){var rows=document.querySelectorAll('#cases tbody tr');
  rows.forEach(function(r){var ok=true;f.forEach(function(inp){var v=inp.value.trim().toLowerCase();if(!v)return;
   var col=parseInt(inp.dataset.col),cell=r.cells[col].textContent.toLowerCase();
   if(inp.dataset.min){ok=ok&&parseFloat(cell)>=parseFloat(v);}else{ok=ok&&cell.indexOf(v)>=0;}});
   r.style.display=ok?'':'none';});}
 f.forEach(function(inp){inp.addEventListener('input',apply);});});"""


def esc(v) -> str:
    return escape(str(v))


def fmt(v, digits: int = 3) -> str:
    if v is None:
        return "—"
    try:
        return f"{float(v):.{digits}f}"
    except (TypeError, ValueError):
        return esc(v)


def page(title: str, body: str, depth: int = 0) -> str:
    up = "../" * depth
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
            f'<link rel="icon" href="data:,"><link rel="stylesheet" href="{up}assets/report.css">'
            f'<script src="{up}assets/report.js"></script></head><body>'
            f'<nav><a href="{up}index.html">Overview</a><a href="{up}cases.html">Cases</a>'
            f'<a href="{up}compare.html">Comparison</a></nav><h1>{esc(title)}</h1>{body}</body></html>')


def table(head: list[str], rows: list[list[str]], cls: str = "sortable", tid: str = "") -> str:
    """Rows are already-escaped HTML cells."""
    idattr = f' id="{tid}"' if tid else ""
    h = "".join(f"<th>{esc(c)}</th>" for c in head)
    b = "".join("<tr>" + "".join(c if c.startswith("<td") else f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f'<table class="{cls}"{idattr}><thead><tr>{h}</tr></thead><tbody>{b}</tbody></table>'


def num(v, digits: int = 3) -> str:
    dv = "" if v is None else f' data-v="{float(v):.6f}"'
    return f'<td class="num"{dv}>{fmt(v, digits)}</td>'


def warnings(msgs: list[str]) -> str:
    return "".join(f'<div class="warn">{esc(m)}</div>' for m in msgs)
