// The dashboard (/dashboard/) in a real headless Chromium: the page loads with its charts,
// the stock table shows the watched SKU from the snapshot, a reservation made through the
// API appears in the table (reserved, available) and in the recent reservations, an order
// in the recent orders, the health badges fill in; a screenshot is kept.
//
// Usage: node dashboard.cjs HTTP_BASE SCREENSHOT_PATH
const {fail, setStock, launchChromium, run} = require('./common.cjs');

run(async () => {
  const [base, screenshot] = process.argv.slice(2);
  await setStock(base, 'dash-1', 20);
  await setStock(base, 'dash-2', 5);

  const browser = await launchChromium();
  try {
    const page = await browser.newPage();
    await page.setViewport({width: 1280, height: 900});
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(`${base}/dashboard/?sku=dash-1&sku=dash-2`, {waitUntil: 'load'});
    const cell = (sku, column) => page.$eval(
        `#stock tbody tr[data-sku="${sku}"] td:nth-child(${column})`, (td) => td.textContent);
    // The snapshot: both levels, on hand as set.
    await page.waitForSelector('#stock tbody tr[data-sku="dash-1"]', {timeout: 10000});
    await page.waitForSelector('#stock tbody tr[data-sku="dash-2"]', {timeout: 10000});
    if ((await cell('dash-1', 3)) !== '20') fail(`dash-1 on hand: ${await cell('dash-1', 3)}`);
    // Two charts drawn by uPlot.
    const charts = await page.$$eval('.uplot canvas', (c) => c.length);
    if (charts < 2) fail(`${charts} charts`);

    // A reservation through the API: the table follows, and it is among the recent ones.
    const r = await fetch(`${base}/v1/reservations`, {
      method: 'POST',
      body: JSON.stringify({lines: [{sku: 'dash-1', quantity: 3}], ttlMs: 60000}),
    });
    if (r.status !== 201) fail(`reserve: ${r.status} ${await r.text()}`);
    const reservation = (await r.json()).reservation.reservationId;
    await page.waitForFunction(() => {
      const row = document.querySelector('#stock tbody tr[data-sku="dash-1"]');
      return row && row.children[3].textContent === '3' && row.children[4].textContent === '17';
    }, {timeout: 10000});
    await page.waitForFunction(
        (id) => [...document.querySelectorAll('#recent-reservations li')]
            .some((li) => li.textContent.includes(id) && li.textContent.includes('reserve')),
        {timeout: 10000}, reservation);

    // An order: it shows among the recent orders.
    const o = await fetch(`${base}/v1/orders`, {
      method: 'POST',
      body: JSON.stringify({customer_id: 'cust-dash', item_ids: ['dash-2'], total_amount: 4.5}),
    });
    if (o.status !== 201) fail(`order: ${o.status} ${await o.text()}`);
    const order = (await o.json()).orderId;
    await page.waitForFunction(
        (id) => [...document.querySelectorAll('#recent-orders li')]
            .some((li) => li.textContent.includes(id) && li.textContent.includes('CONFIRMED')),
        {timeout: 10000}, order);
    await page.waitForFunction(
        () => document.getElementById('serving').textContent === 'server: serving' &&
            document.getElementById('kafka').textContent === 'Kafka: off',
        {timeout: 10000});
    // A few seconds of chart data, then the picture.
    await new Promise((resolve) => setTimeout(resolve, 2500));
    await page.screenshot({path: screenshot, fullPage: true});
    if (errors.length) fail(`errors on the page: ${errors.join('; ')}`);
    console.log(`dashboard: reservation ${reservation} and order ${order} shown; ${screenshot}`);
  } finally {
    await browser.close();
  }
});
