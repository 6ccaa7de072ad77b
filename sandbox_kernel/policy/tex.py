"""TeX that MathJax typesets in the page: a closed list of macros.

JupyterLab 4.6 typesets maths with MathJax 3.2 (its ``safe`` extension on) in ``text/latex``
outputs, in Markdown, in HTML outputs (``RenderedHTML`` calls the LaTeX typesetter), and in
the ``HTMLMath``/``Label`` widgets and widget descriptions. MathJax's ``safe`` extension still
keeps ``\\style{cursor:url(https://...)}{X}``: the browser fetches that image when the maths
is drawn, a way out for a sandbox with no network. Other macros make links (``\\href``), set
classes and ids (``\\class``, ``\\cssId``), load extensions (``\\require``) or define new
macros (``\\def``, ``\\newcommand``).

So every control word (``\\name``) is checked against :data:`MACROS`, the harmless ones of
MathJax's ``base`` and ``ams`` packages (letters, symbols, operators, fonts, spacing, arrays).
Also kept: the extensions JupyterLab 4.6 loads for chemistry and quantum
notation (mhchem's ``\\ce``/``\\pu``, braket's ``\\bra``/``\\ket``), ``\\enclose`` and ``\\bbox``, and
the macros of MathJax's ``physics`` package (JupyterLab 4.6 does not load it: they show as
undefined names, as without the policy). One not in the list loses its backslash and is shown
as letters (``\\style`` → ``style``). ``\\begin``/``\\end`` take only the environments of
:data:`ENVIRONMENTS`; the macros whose arguments reach CSS or MathML attributes (colours in
every model MathJax accepts, ``\\bbox``, ``\\enclose``) only plain ones
(:mod:`.tex_arguments`). Control symbols (``\\\\``, ``\\,``, ``\\{`` ...) are all harmless and
kept.
"""

from __future__ import annotations

import re

from .tex_arguments import CHECKED, arguments_ok

MACROS = frozenset("""
alpha beta gamma delta epsilon varepsilon zeta eta theta vartheta iota kappa varkappa lambda mu nu xi pi varpi
rho varrho sigma varsigma tau upsilon phi varphi chi psi omega Gamma Delta Theta Lambda Xi Pi Sigma Upsilon Phi
Psi Omega varGamma varDelta varTheta varLambda varXi varPi varSigma varUpsilon varPhi varPsi varOmega digamma
aleph beth gimel daleth hbar hslash imath jmath ell wp Re Im partial infty nabla emptyset varnothing forall exists
nexists neg lnot top bot angle measuredangle sphericalangle triangle triangledown square blacksquare lozenge
blacklozenge bigstar diamondsuit heartsuit clubsuit spadesuit flat natural sharp prime backprime surd checkmark
circledR circledS mho eth complement Bbbk
pm mp times div cdot ast star circ bullet cap cup sqcap sqcup vee wedge lor land setminus smallsetminus wr
uplus oplus ominus otimes oslash odot bigcirc dagger ddagger amalg diamond triangleleft triangleright
bigtriangleup bigtriangledown lhd rhd unlhd unrhd ltimes rtimes leftthreetimes rightthreetimes dotplus
divideontimes boxplus boxminus boxtimes boxdot centerdot intercal barwedge veebar doublebarwedge curlyvee
curlywedge Cap Cup
leq le geq ge neq ne equiv approx approxeq sim simeq cong propto prec succ preceq succeq ll gg lll ggg subset
supset subseteq supseteq subsetneq supsetneq sqsubset sqsupset sqsubseteq sqsupseteq in ni notin owns mid
nmid parallel nparallel perp models vdash dashv vDash Vdash Vvdash asymp bowtie smile frown doteq doteqdot
leqq geqq leqslant geqslant lesssim gtrsim lessgtr gtrless lneq gneq lneqq gneqq nless ngtr nleq ngeq nsim
ncong nsubseteq nsupseteq ntriangleleft ntriangleright trianglelefteq trianglerighteq therefore because
between pitchfork backsim backsimeq eqsim thicksim thickapprox Subset Supset varpropto
leftarrow gets rightarrow to leftrightarrow Leftarrow Rightarrow Leftrightarrow longleftarrow longrightarrow
longleftrightarrow Longleftarrow Longrightarrow Longleftrightarrow iff implies impliedby mapsto longmapsto
uparrow downarrow updownarrow Uparrow Downarrow Updownarrow nearrow searrow swarrow nwarrow hookleftarrow
hookrightarrow leftharpoonup leftharpoondown rightharpoonup rightharpoondown rightleftharpoons
leftrightharpoons upharpoonleft upharpoonright downharpoonleft downharpoonright leadsto rightsquigarrow
leftleftarrows rightrightarrows leftrightarrows rightleftarrows twoheadleftarrow twoheadrightarrow
curvearrowleft curvearrowright circlearrowleft circlearrowright Lsh Rsh nleftarrow nrightarrow
nLeftarrow nRightarrow nleftrightarrow nLeftrightarrow xleftarrow xrightarrow
sum prod coprod int iint iiint iiiint oint bigcap bigcup bigsqcup bigvee bigwedge bigodot bigotimes
bigoplus biguplus intop smallint
sin cos tan cot sec csc arcsin arccos arctan sinh cosh tanh coth exp log ln lg lim liminf limsup max min sup
inf det dim ker hom arg deg gcd Pr injlim projlim varlimsup varliminf varinjlim varprojlim operatorname
frac dfrac tfrac cfrac binom dbinom tbinom genfrac over atop choose brace brack above sqrt root of
left right middle big Big bigg Bigg bigl bigr Bigl Bigr biggl biggr Biggl Biggr bigm Bigm biggm Biggm
langle rangle lceil rceil lfloor rfloor lvert rvert lVert rVert vert Vert backslash lbrace rbrace lbrack
rbrack ulcorner urcorner llcorner lrcorner lgroup rgroup lmoustache rmoustache
hat widehat check tilde widetilde acute grave dot ddot dddot ddddot breve bar vec mathring overline underline
overbrace underbrace overleftarrow overrightarrow overleftrightarrow underleftarrow underrightarrow
underleftrightarrow overset underset stackrel sideset not cancel bcancel xcancel cancelto boxed fbox
mathrm mathit mathbf mathsf mathtt mathcal mathscr mathfrak mathbb mathnormal boldsymbol bm pmb bold rm it bf
sf tt cal frak Bbb scr mit oldstyle textrm textit textbf textsf texttt textnormal text mbox hbox textup
emph displaystyle textstyle scriptstyle scriptscriptstyle limits nolimits tiny Tiny small normalsize
large Large LARGE huge Huge
quad qquad enspace thinspace negthinspace medspace negmedspace thickspace negthickspace hspace kern mkern
mskip hskip hfill hfil space nobreakspace strut mathstrut vphantom hphantom phantom smash raise lower
vcenter rule
ldots cdots vdots ddots dots dotsb dotsc dotsi dotsm dotso cr newline nonumber notag tag label ref eqref
substack begin end hline hdashline cline arraystretch multicolumn
color textcolor colorbox fcolorbox definecolor rowcolor columncolor cellcolor bbox enclose
ce pu
bra ket braket Bra Ket Braket set Set ketbra Ketbra
dv pdv fdv dd var qty pqty bqty vqty Bqty abs norm eval evaluated order commutator comm anticommutator acomm
poissonbracket pb vb va vu grad curl divergence laplacian cross cp vdot dotproduct crossproduct innerproduct ip
outerproduct op dyad ev expval expectationvalue mel matrixel matrixelement tr Tr trace rank erf Res pv PV Im Re
mqty pmqty bmqty vmqty smqty imat xmat zmat paulimat dmat admat identitymatrix xmatrix zeromatrix paulimatrix
diagonalmatrix antidiagonalmatrix flatfrac derivative partialderivative variation functionalderivative
mathop mathbin mathrel mathopen mathclose mathpunct mathinner mathord
lt gt amp
""".split())
"""Control words (without the backslash) kept as they are."""

ENVIRONMENTS = frozenset("""
matrix pmatrix bmatrix Bmatrix vmatrix Vmatrix smallmatrix array subarray cases dcases rcases aligned
alignedat gathered split align align* alignat alignat* equation equation* gather gather* multline multline*
eqnarray eqnarray* flalign flalign* CD
""".split())

MATH_STARTS = re.compile(r"\$|\\[(\[]|\\(?:begin|ref|eqref)\b")
"""What starts maths for MathJax as JupyterLab configures it (``$``, ``$$``, ``\\(``, ``\\[``,
environments, ``\\ref``/``\\eqref``): text without any of these is never typeset."""

_CONTROL = re.compile(r"\\([A-Za-z]+|.)", re.DOTALL)
_ARGUMENT = re.compile(r"\s*(\[[A-Za-z]*\])?\s*\{([^{}]*)\}")


def police_tex(text: str) -> tuple[str, bool]:
    """``(text, changed)``: ``text`` with every control word not in :data:`MACROS` (and every
    ``\\begin``/``\\end`` of another environment, every colour that is not plain) written
    without its backslash."""
    out, changed, last = [], False, 0
    for match in _CONTROL.finditer(text):
        name = match.group(1)
        if len(name) == 1 and not name.isalpha():
            continue  # a control symbol: \\ \, \{ \$ ...
        if _macro_ok(name, text, match.end()):
            continue
        out.append(text[last:match.start()])
        out.append(name)
        last, changed = match.end(), True
    if not changed:
        return text, False
    out.append(text[last:])
    return "".join(out), True


def _macro_ok(name: str, text: str, end: int) -> bool:
    if name not in MACROS:
        return False
    if name in ("begin", "end"):
        argument = _ARGUMENT.match(text, end)
        return argument is not None and argument.group(1) is None and argument.group(2).strip() in ENVIRONMENTS
    return name not in CHECKED or arguments_ok(name, text, end)


def typeset(text: str) -> bool:
    """Whether MathJax would find maths in ``text`` (see :data:`MATH_STARTS`)."""
    return MATH_STARTS.search(text) is not None


__all__ = ["police_tex", "typeset", "MACROS", "ENVIRONMENTS"]
