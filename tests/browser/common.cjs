// What the browser tests share: failing with a message, setting a SKU's stock over the
// gateway, and Debian's chromium started headless by puppeteer-core (NODE_PATH:
// .cache/node/node_modules; CHROMIUM overrides the binary).
const puppeteer = require('puppeteer-core');

const fail = (why) => {
  console.error(`FAIL: ${why}`);
  process.exit(1);
};

async function setStock(base, sku, quantity) {
  const r = await fetch(`${base}/v1/stock:adjust`, {
    method: 'POST',
    body: JSON.stringify({sku, mode: 'ADJUST_MODE_SET', quantity}),
  });
  if (r.status !== 200) fail(`setting stock of ${sku}: ${r.status} ${await r.text()}`);
}

function launchChromium() {
  return puppeteer.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
}

// Runs `main`, failing the test with the stack of anything it throws.
function run(main) {
  main().catch((e) => fail(e.stack || e));
}

module.exports = {fail, setStock, launchChromium, run};
