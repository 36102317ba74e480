/* The Streamlit component protocol (API version 1) by hand, for bertviz's head and model
 * views. Streamlit posts {type: "streamlit:render", args} with:
 *   kind     "head" or "model"
 *   tokens   the window's tokens (drawn with d3's .text(): never parsed as HTML)
 *   shape    [layers, heads, n, n]
 *   bits     bytes: a packed bitmap (numpy packbits, big-endian bit order) of the weights kept
 *   vals     bytes: each kept weight in 1/255ths, in order
 *   layer, heads, height
 * Weights not kept (below the views' drawing threshold) are 0 here; the rest are the
 * model's own, rounded to 1/255. */
(function () {
  "use strict";
  function send(type, data) {
    window.parent.postMessage(Object.assign({ isStreamlitMessage: true, type: type }, data || {}), "*");
  }

  function decode(shape, bits, vals) {
    var L = shape[0], H = shape[1], n = shape[2], m = shape[3];
    var out = [], k = 0, pos = 0;
    for (var l = 0; l < L; l++) {
      var layer = [];
      for (var h = 0; h < H; h++) {
        var head = [];
        for (var i = 0; i < n; i++) {
          var row = new Array(m);
          for (var j = 0; j < m; j++, pos++) {
            var on = (bits[pos >> 3] >> (7 - (pos & 7))) & 1;
            row[j] = on ? vals[k++] / 255 : 0;
          }
          head.push(row);
        }
        layer.push(head);
      }
      out.push(layer);
    }
    return out;
  }

  var last = null;
  var count = 0;

  function render(args) {
    var signature = JSON.stringify([args.kind, args.tokens, args.shape, args.layer, args.heads,
                                    args.bits.length, args.vals.length,
                                    Array.prototype.slice.call(args.vals, 0, 64)]);
    if (signature === last) { send("streamlit:setFrameHeight", { height: args.height }); return; }
    last = signature;
    var id = "bertviz-" + (++count);
    var root = document.getElementById("root");
    var attn = decode(args.shape, args.bits, args.vals);
    var L = args.shape[0], H = args.shape[1];
    var layers = []; for (var l = 0; l < L; l++) layers.push(l);
    var heads = []; for (var h = 0; h < H; h++) heads.push(h);
    var common = { attention: [{ name: null, attn: attn, left_text: args.tokens, right_text: args.tokens }],
                   default_filter: "0", root_div_id: id, include_layers: layers };
    root.innerHTML = "";
    var div = document.createElement("div");
    div.id = id;
    if (args.kind === "head") {
      var span = document.createElement("span");
      span.style.userSelect = "none";
      span.appendChild(document.createTextNode("Layer: "));
      var select = document.createElement("select");
      select.id = "layer";
      span.appendChild(select);
      div.appendChild(span);
    }
    var vis = document.createElement("div");
    vis.id = "vis";
    div.appendChild(vis);
    root.appendChild(div);
    if (args.kind === "head") {
      window.rbHeadView(Object.assign(common, { layer: args.layer, heads: args.heads }), window.jQuery, window.d3);
    } else {
      window.rbModelView(Object.assign(common, { display_mode: "light", include_heads: heads, total_heads: H }),
                         window.jQuery, window.d3);
    }
    send("streamlit:setFrameHeight", { height: args.height });
  }

  window.addEventListener("message", function (event) {
    if (event.data && event.data.type === "streamlit:render") {
      try {
        render(event.data.args);
      } catch (err) {
        document.getElementById("root").textContent = "The view could not be drawn: " + err;
        send("streamlit:setFrameHeight", { height: 60 });
      }
    }
  });
  send("streamlit:componentReady", { apiVersion: 1 });
})();
