// app.js ADDON [crash|fatal]: named JavaScript functions, recursing, that call into the addon
// (addon.c), which crashes: so the crashed thread runs native code under JavaScript frames.
const addon = require(process.argv[2]);
const how = process.argv[3] || 'crash';

function crashInNative(depth) {
    if (depth > 0) return crashInNative(depth - 1) + 1;
    addon[how]();
    return 0;
}

function outerFunction() {
    for (let i = 0; i < 3; i++) crashInNative(3);
}

outerFunction();
