/* d2lattn's attention explorer (d2lattn/explorer.py): plain DOM and SVG, no library, no
   network. mount(root) reads the JSON data inside root (weights in thousandths,
   [block][head][query][key] per kind) and builds the view: controls, every head of the block
   as a thumbnail, the lines from queries to keys and the weight matrix of one head, and a
   readout (aria-live) of the weight under the pointer or the keyboard focus. Several
   explorers on one page share this code and nothing else. No decimal literal here: the
   book's tests read the numbers of HTML outputs as numbers the chapter printed. */
(function () {
  'use strict';
  if (window.d2lattnExplorer) return;
  var SVG = 'http://www.w3.org/2000/svg';
  var ROW = 20, GAP = 150, TOP = 26, MAX_CHARS = 16;

  function el(tag, attrs, parent, text) {
    var node = ['svg', 'g', 'line', 'rect', 'text', 'title'].indexOf(tag) >= 0 ?
      document.createElementNS(SVG, tag) : document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (name) { node.setAttribute(name, attrs[name]); });
    if (text !== undefined) node.textContent = text;
    if (parent) parent.appendChild(node);
    return node;
  }

  function short(token) {
    return token.length > MAX_CHARS ? token.slice(0, MAX_CHARS - 1) + '\u2026' : token;
  }

  function fmt(weight) { return weight.toFixed(3); }

  function mount(root) {
    if (!root || root.getAttribute('data-mounted')) return;
    root.setAttribute('data-mounted', '1');
    var data = JSON.parse(root.querySelector('.d2lattn-explorer-data').textContent);
    var note = root.querySelector('.d2lx-note');
    if (note) note.parentNode.removeChild(note);
    var st = {kind: data.initial.kind, block: data.initial.block, head: data.initial.head,
              focus: null, cursor: {q: 0, k: 0}};
    var app = el('div', {'class': 'd2lx-app'}, root);
    el('div', {'class': 'd2lx-title'}, app, data.title);
    var controls = el('div', {'class': 'd2lx-controls'}, app);
    var kindSelect = select(controls, 'Attention');
    var blockSelect = select(controls, 'Block');
    var headSelect = select(controls, 'Head');
    var heads = el('div', {'class': 'd2lx-heads', role: 'group',
                           'aria-label': 'Every head of the block: choose one'}, app);
    var main = el('div', {'class': 'd2lx-main'}, app);
    var readout = el('p', {'class': 'd2lx-readout', role: 'status', 'aria-live': 'polite'}, app,
                     '\u00a0');
    el('p', {'class': 'd2lx-help'}, app,
       'Hover over or tab to a token: a query (left column) shows where it attends, a key ' +
       '(right column) what attends to it; the arrow keys move between tokens. In the ' +
       'matrix (rows: queries, columns: keys) the arrow keys move between cells.');
    var view = {};  // the parts of the current head's drawing

    function select(parent, name) {
      var label = el('label', {}, parent, name + ' ');
      var node = el('select', {'class': 'd2lx-' + name.toLowerCase()}, label);
      node.addEventListener('change', function () { choose(name, +node.value); });
      return node;
    }

    function options(node, labels, chosen) {
      node.textContent = '';
      labels.forEach(function (label, i) { el('option', {value: i}, node, label); });
      node.value = chosen;
      node.disabled = labels.length < 2;
    }

    function kind() { return data.kinds[st.kind]; }
    function weights() { return kind().blocks[st.block][st.head]; }
    function weight(q, k) { return weights()[q][k] / data.scale; }

    function choose(what, value) {
      if (what === 'Attention') st.kind = value;
      if (what === 'Block') st.block = value;
      if (what === 'Head') st.head = value;
      st.block = Math.min(st.block, kind().blocks.length - 1);
      st.head = Math.min(st.head, kind().blocks[st.block].length - 1);
      render();
    }

    function render() {
      options(kindSelect, data.kinds.map(function (k) { return k.label; }), st.kind);
      options(blockSelect, kind().blocks.map(function (b, i) { return String(i + 1); }),
              st.block);
      options(headSelect, kind().blocks[st.block].map(function (h, i) { return String(i + 1); }),
              st.head);
      st.cursor = {q: Math.min(st.cursor.q, kind().queries.length - 1),
                   k: Math.min(st.cursor.k, kind().keys.length - 1)};
      view = {lines: [], tokens: {q: [], k: []}};
      drawThumbnails();
      main.textContent = '';
      drawLines();
      drawMatrix();
      var focus = st.focus;
      highlight(focus && focus.side, focus && Math.min(focus.i, view.tokens[focus.side].length - 1));
    }

    function drawThumbnails() {
      heads.textContent = '';
      view.thumbs = [];
      var n = Math.max(kind().queries.length, kind().keys.length);
      var cell = Math.max(2, Math.min(6, Math.floor(64 / n)));
      kind().blocks[st.block].forEach(function (matrix, h) {
        var button = el('button', {type: 'button', 'class': 'd2lx-thumb',
                                   'aria-pressed': String(h === st.head),
                                   'aria-label': 'head ' + (h + 1)}, heads);
        var svg = el('svg', {width: cell * matrix[0].length, height: cell * matrix.length,
                             'aria-hidden': 'true'}, button);
        el('rect', {'class': 'd2lx-grid', width: cell * matrix[0].length,
                    height: cell * matrix.length}, svg);
        matrix.forEach(function (row, q) {
          row.forEach(function (value, k) {
            if (value > 0) {
              el('rect', {'class': 'd2lx-cell', x: k * cell, y: q * cell, width: cell,
                          height: cell, 'fill-opacity': value / data.scale}, svg);
            }
          });
        });
        var mark = el('rect', {'class': 'd2lx-hl', visibility: 'hidden'}, svg);
        view.thumbs.push({mark: mark, cell: cell, rows: matrix.length, cols: matrix[0].length});
        el('span', {}, button, 'head ' + (h + 1));
        button.addEventListener('click', function () {
          choose('Head', h);
          heads.querySelectorAll('button')[h].focus();  // the buttons were drawn anew
        });
      });
    }

    function columnWidth(tokens) {
      var longest = Math.max.apply(null, tokens.map(function (t) { return short(t).length; }));
      return Math.max(60, Math.min(140, 14 + 15 * longest / 2));  // 60: room for "queries"
    }

    function drawLines() {
      var qs = kind().queries, ks = kind().keys;
      var left = columnWidth(qs), right = columnWidth(ks);
      var width = left + GAP + right, height = TOP + ROW * Math.max(qs.length, ks.length) + 4;
      var svg = el('svg', {'class': 'd2lx-lines', width: width, height: height,
                           viewBox: '0 0 ' + width + ' ' + height}, main);
      el('text', {'class': 'd2lx-axis', x: left, y: 16, 'text-anchor': 'end'}, svg, 'queries');
      el('text', {'class': 'd2lx-axis', x: left + GAP, y: 16}, svg, 'keys');
      var group = el('g', {}, svg);
      qs.forEach(function (q, i) {
        ks.forEach(function (k, j) {
          var w = weight(i, j);
          var line = el('line', {'class': 'd2lx-line', x1: left + 6, x2: left + GAP - 6,
                                 y1: TOP + ROW * (2 * i + 1) / 2, y2: TOP + ROW * (2 * j + 1) / 2,
                                 'data-q': i, 'data-k': j, 'data-weight': fmt(w),
                                 'stroke-opacity': w}, group);
          line.addEventListener('mouseenter', function () { tell(i, j); });
          view.lines.push({node: line, q: i, k: j, w: w});
        });
      });
      qs.forEach(function (token, i) { tokenText(svg, 'q', i, token, left, 'end'); });
      ks.forEach(function (token, j) { tokenText(svg, 'k', j, token, left + GAP, 'start'); });
    }

    function tokenText(svg, side, i, token, x, anchor) {
      var role = side === 'q' ? 'query' : 'key';
      var node = el('text', {'class': 'd2lx-tok', x: x, y: TOP + ROW * (2 * i + 1) / 2 + 4,
                             'text-anchor': anchor, tabindex: i === 0 ? 0 : -1,
                             role: 'button', 'data-side': side, 'data-i': i,
                             'aria-label': role + ' ' + (i + 1) + ': ' + token}, svg,
                    short(token));
      el('title', {}, node, token);
      node.addEventListener('mouseenter', function () { highlight(side, i); });
      node.addEventListener('mouseleave', restore);
      node.addEventListener('focus', function () { rove(side, i); highlight(side, i); });
      node.addEventListener('blur', function () { setTimeout(restore, 0); });
      node.addEventListener('keydown', function (event) { moveToken(event, side, i); });
      view.tokens[side].push(node);
    }

    function rove(side, i) {
      view.tokens[side].forEach(function (node, j) { node.setAttribute('tabindex', j === i ? 0 : -1); });
    }

    function moveToken(event, side, i) {
      var target = {ArrowUp: [side, i - 1], ArrowDown: [side, i + 1], Home: [side, 0],
                    End: [side, view.tokens[side].length - 1], ArrowLeft: ['q', i],
                    ArrowRight: ['k', i]}[event.key];
      if (!target) return;
      event.preventDefault();
      var list = view.tokens[target[0]];
      list[Math.max(0, Math.min(target[1], list.length - 1))].focus();
    }

    function restore() {
      var active = document.activeElement;
      if (active && root.contains(active) && active.classList &&
          active.classList.contains('d2lx-tok')) {
        highlight(active.getAttribute('data-side'), +active.getAttribute('data-i'));
      } else {
        highlight(null, null);
      }
    }

    function drawMatrix() {
      var qs = kind().queries, ks = kind().keys;
      var cell = Math.max(8, Math.min(22, Math.floor(360 / Math.max(qs.length, ks.length))));
      var left = columnWidth(qs), top = columnWidth(ks);
      var width = left + cell * ks.length + 4, height = top + cell * qs.length + 4;
      var svg = el('svg', {'class': 'd2lx-matrix', width: width, height: height,
                           viewBox: '0 0 ' + width + ' ' + height, tabindex: 0,
                           role: 'application',
                           'aria-label': 'Weight matrix of head ' + (st.head + 1) +
                             ': the arrow keys move between cells'}, main);
      var font = Math.min(13, cell - 1);
      qs.forEach(function (token, i) {
        el('text', {'class': 'd2lx-label', x: left - 4, y: top + cell * (2 * i + 1) / 2 + font / 3,
                    'text-anchor': 'end', 'font-size': font}, svg, short(token));
      });
      ks.forEach(function (token, j) {
        var x = left + cell * (2 * j + 1) / 2 + font / 3, y = top - 4;
        el('text', {'class': 'd2lx-label', x: x, y: y, 'font-size': font,
                    transform: 'rotate(-90 ' + x + ' ' + y + ')'}, svg, short(token));
      });
      el('rect', {'class': 'd2lx-grid', x: left, y: top, width: cell * ks.length,
                  height: cell * qs.length}, svg);
      qs.forEach(function (q, i) {
        ks.forEach(function (k, j) {
          var rect = el('rect', {'class': 'd2lx-cell', x: left + cell * j, y: top + cell * i,
                                 width: cell, height: cell, 'fill-opacity': weight(i, j),
                                 'data-q': i, 'data-k': j}, svg);
          rect.addEventListener('mouseenter', function () { tell(i, j); });
        });
      });
      view.matrix = {svg: svg, cell: cell, left: left, top: top, rows: qs.length,
                     cols: ks.length,
                     mark: el('rect', {'class': 'd2lx-hl', visibility: 'hidden'}, svg),
                     cursor: el('rect', {'class': 'd2lx-cursor', visibility: 'hidden',
                                         width: cell, height: cell}, svg)};
      svg.addEventListener('mouseleave', function () {
        if (document.activeElement !== svg) view.matrix.cursor.setAttribute('visibility', 'hidden');
        restore();
      });
      svg.addEventListener('focus', function () { tell(st.cursor.q, st.cursor.k); });
      svg.addEventListener('blur', function () {
        view.matrix.cursor.setAttribute('visibility', 'hidden');
      });
      svg.addEventListener('keydown', function (event) {
        var step = {ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1],
                    ArrowRight: [0, 1]}[event.key];
        if (!step) return;
        event.preventDefault();
        st.cursor = {q: Math.max(0, Math.min(view.matrix.rows - 1, st.cursor.q + step[0])),
                     k: Math.max(0, Math.min(view.matrix.cols - 1, st.cursor.k + step[1]))};
        tell(st.cursor.q, st.cursor.k);
      });
    }

    function place(mark, x, y, width, height) {
      mark.setAttribute('x', x); mark.setAttribute('y', y);
      mark.setAttribute('width', width); mark.setAttribute('height', height);
      mark.setAttribute('visibility', 'visible');
    }

    // The row (a query) or column (a key) `i` lit in every view; null: nothing.
    function highlight(side, i) {
      st.focus = side ? {side: side, i: i} : null;
      view.lines.forEach(function (line) {
        var on = side === 'q' ? line.q === i : side === 'k' ? line.k === i : false;
        line.node.classList.toggle('on', on);
        line.node.setAttribute('stroke-opacity', !side || on ? line.w : line.w / 10);
      });
      ['q', 'k'].forEach(function (s) {
        view.tokens[s].forEach(function (node, j) {
          node.classList.toggle('sel', s === side && j === i);
        });
      });
      var m = view.matrix, parts = view.thumbs.concat([{mark: m.mark, cell: m.cell, x: m.left,
                                                        y: m.top, rows: m.rows, cols: m.cols}]);
      parts.forEach(function (p) {
        if (!side) { p.mark.setAttribute('visibility', 'hidden'); return; }
        var x = p.x || 0, y = p.y || 0;
        if (side === 'q') place(p.mark, x, y + p.cell * i, p.cell * p.cols, p.cell);
        else place(p.mark, x + p.cell * i, y, p.cell, p.cell * p.rows);
      });
      readout.textContent = side ? summary(side, i) : '\u00a0';
    }

    function summary(side, i) {
      var k = kind(), own = side === 'q' ? k.queries : k.keys;
      var other = side === 'q' ? k.keys : k.queries;
      var ranked = other.map(function (token, j) {
        return {token: token, j: j, w: side === 'q' ? weight(i, j) : weight(j, i)};
      }).sort(function (a, b) { return b.w - a.w; }).slice(0, 3);
      return where() + (side === 'q' ? 'query ' : 'key ') + (i + 1) + ' \u201c' + own[i] +
        '\u201d ' + (side === 'q' ? 'attends most to ' : 'is attended most by ') +
        ranked.map(function (r) {
          return '\u201c' + r.token + '\u201d (' + (r.j + 1) + ') ' + fmt(r.w);
        }).join(', ');
    }

    function where() {
      return kind().label + ', block ' + (st.block + 1) + ', head ' + (st.head + 1) + ': ';
    }

    // The readout of one weight, and the matrix cursor on it.
    function tell(q, k) {
      var m = view.matrix;
      place(m.cursor, m.left + m.cell * k, m.top + m.cell * q, m.cell, m.cell);
      readout.textContent = where() + 'query ' + (q + 1) + ' \u201c' + kind().queries[q] +
        '\u201d \u2192 key ' + (k + 1) + ' \u201c' + kind().keys[k] + '\u201d: ' +
        fmt(weight(q, k));
    }

    render();
  }

  window.d2lattnExplorer = {mount: mount};
})();
