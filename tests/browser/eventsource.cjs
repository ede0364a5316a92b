// An EventSource in a real headless Chromium on the watch route: the snapshot arrives, then
// a stock change made from outside arrives as an event whose id is its sequence.
//
// Usage: node eventsource.cjs HTTP_BASE
const puppeteer = require('puppeteer-core');  // NODE_PATH: .cache/node/node_modules

(async () => {
  const [base] = process.argv.slice(2);
  const fail = (why) => { console.error(`FAIL: ${why}`); process.exit(1); };
  const adjust = (quantity) => fetch(`${base}/v1/stock:adjust`, {
    method: 'POST',
    body: JSON.stringify({sku: 'es-sku', mode: 'ADJUST_MODE_SET', quantity}),
  });
  if ((await adjust(1)).status !== 200) fail('seeding stock');

  const browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  try {
    const page = await browser.newPage();
    await page.goto(`${base}/healthz`);
    await page.evaluate(() => {
      window.events = [];
      const source = new EventSource('/v1/stock:watch?sku=es-sku');
      source.onmessage = (e) => window.events.push({id: e.lastEventId, data: JSON.parse(e.data)});
    });
    await page.waitForFunction(
        () => window.events.some((e) => e.data.kind === 'KIND_SNAPSHOT_END'), {timeout: 10000});
    if ((await adjust(7)).status !== 200) fail('adjusting stock');
    await page.waitForFunction(
        () => window.events.some((e) => e.data.kind === 'KIND_CHANGE'), {timeout: 10000});
    const events = await page.evaluate(() => window.events);
    const change = events.find((e) => e.data.kind === 'KIND_CHANGE');
    if (change.data.level.onHand !== '7') fail(`change: ${JSON.stringify(change)}`);
    if (change.id !== change.data.sequence) fail(`event id ${change.id} is not the sequence`);
    console.log(`eventsource: ${events.length} events, change at sequence ${change.id}`);
  } finally {
    await browser.close();
  }
})().catch((e) => {
  console.error(`FAIL: ${e.stack || e}`);
  process.exit(1);
});
