"""Word documents made by the tests: real DOCX packages (WordprocessingML in a zip), written here part by
part, with what python-docx cannot write: footnotes, and the page breaks Word records when it lays a document
out. No binary fixture in the repository."""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_RELS = "http://schemas.openxmlformats.org/package/2006/relationships"
_OFFICE = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml"
# In a paragraph's text: a footnote's reference mark, and a page break (a hard one, then Word's rendered one).
_XML = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
_NOTE_MARK = '<w:r><w:rPr><w:rStyle w:val="FootnoteReference"/></w:rPr><w:footnoteRef/></w:r>'
_MARKUP = re.compile(r"\[\^(\d+)\]|\f")


@dataclass(frozen=True)
class Para:
    """A paragraph: ``text`` with ``[^N]`` where footnote N's mark is and ``\\f`` where a page breaks; a style
    id (``Quote``) and a left indent in twips."""

    text: str
    style: str = ""
    indent_twips: int = 0


def _runs(text: str) -> str:
    out: list[str] = []
    at = 0
    for match in [*_MARKUP.finditer(text), None]:
        chunk = text[at : match.start() if match else len(text)]
        # one run per word, as an editor leaves them
        for word in re.findall(r"\S+\s*|\s+", chunk):
            out.append(f'<w:r><w:t xml:space="preserve">{escape(word)}</w:t></w:r>')
        if match is None:
            break
        if match.group(1):
            mark = f'<w:footnoteReference w:id="{match.group(1)}"/>'
            out.append(f'<w:r><w:rPr><w:rStyle w:val="FootnoteReference"/></w:rPr>{mark}</w:r>')
        else:
            out.append('<w:r><w:br w:type="page"/></w:r><w:r><w:lastRenderedPageBreak/></w:r>')
        at = match.end()
    return "".join(out)


def _paragraph(para: Para | str) -> str:
    para = Para(para) if isinstance(para, str) else para
    properties = ""
    if para.style or para.indent_twips:
        style = f'<w:pStyle w:val="{para.style}"/>' if para.style else ""
        indent = f'<w:ind w:left="{para.indent_twips}" w:right="{para.indent_twips}"/>' if para.indent_twips else ""
        properties = f"<w:pPr>{style}{indent}</w:pPr>"
    return f"<w:p>{properties}{_runs(para.text)}</w:p>"


_STYLES = f"""<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:styles xmlns:w="{W}">
<w:style w:type="paragraph" w:default="1" w:styleId="Normal"><w:name w:val="Normal"/></w:style>
<w:style w:type="paragraph" w:styleId="Quote"><w:name w:val="Quote"/><w:basedOn w:val="Normal"/>
<w:pPr><w:ind w:left="864" w:right="864"/></w:pPr></w:style>
<w:style w:type="paragraph" w:styleId="BlockCitation"><w:name w:val="Block Citation"/><w:basedOn w:val="Normal"/>
<w:pPr><w:ind w:left="1440"/></w:pPr></w:style>
<w:style w:type="paragraph" w:styleId="FootnoteText"><w:name w:val="footnote text"/>
<w:basedOn w:val="Normal"/></w:style>
<w:style w:type="character" w:styleId="FootnoteReference"><w:name w:val="footnote reference"/></w:style>
</w:styles>"""


def make_docx(paragraphs: Sequence[Para | str], footnotes: Mapping[int, Sequence[str]] | None = None) -> bytes:
    """A DOCX whose body is ``paragraphs`` and whose footnote N has the paragraphs ``footnotes[N]``."""
    footnotes = footnotes or {}
    body = "".join(_paragraph(p) for p in paragraphs)
    document = f'{_XML}<w:document xmlns:w="{W}"><w:body>{body}<w:sectPr/></w:body></w:document>'
    notes = "".join(
        f'<w:footnote w:id="{number}">'
        + "".join(
            f'<w:p><w:pPr><w:pStyle w:val="FootnoteText"/></w:pPr>{_NOTE_MARK}{_runs(" " + text)}</w:p>'
            for text in texts
        )
        + "</w:footnote>"
        for number, texts in footnotes.items()
    )
    separators = (
        '<w:footnote w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p></w:footnote>'
        '<w:footnote w:type="continuationSeparator" w:id="0">'
        "<w:p><w:r><w:continuationSeparator/></w:r></w:p></w:footnote>"
    )
    parts = {
        "[Content_Types].xml": (
            '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
            '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
            f'<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
            '<Default Extension="xml" ContentType="application/xml"/>'
            f'<Override PartName="/word/document.xml" ContentType="{_TYPE}.document.main+xml"/>'
            f'<Override PartName="/word/styles.xml" ContentType="{_TYPE}.styles+xml"/>'
            f'<Override PartName="/word/footnotes.xml" ContentType="{_TYPE}.footnotes+xml"/>'
            "</Types>"
        ),
        "_rels/.rels": (
            f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><Relationships xmlns="{_RELS}">'
            f'<Relationship Id="rId1" Type="{_OFFICE}/officeDocument" Target="word/document.xml"/></Relationships>'
        ),
        "word/_rels/document.xml.rels": (
            f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><Relationships xmlns="{_RELS}">'
            f'<Relationship Id="rId1" Type="{_OFFICE}/styles" Target="styles.xml"/>'
            f'<Relationship Id="rId2" Type="{_OFFICE}/footnotes" Target="footnotes.xml"/></Relationships>'
        ),
        "word/document.xml": document,
        "word/styles.xml": _STYLES,
        "word/footnotes.xml": f'{_XML}<w:footnotes xmlns:w="{W}">{separators}{notes}</w:footnotes>',
    }
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in parts.items():
            archive.writestr(name, content)
    return out.getvalue()
