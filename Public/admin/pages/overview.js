// Overview: today's counts and the adoption picture over 7, 30, 90 or 365 days.
import { get, query } from '../api.js';
import { t, number, day, when } from '../i18n.js';
import { h, section } from '../ui.js';
import { chart } from '../chart.js';

const RANGES = [7, 30, 90, 365];
const METHODS = ['autofill', 'passkey', 'password', 'recovery', 'oidc'];
const percent = (part, whole) => (whole > 0 ? Math.round((part / whole) * 100) : 0);

function stat(label, value, note) {
  return h('div', { class: 'stat' }, h('dt', {}, label), h('dd', {}, h('span', { class: 'stat-value' }, number(value)), note ? h('span', { class: 'stat-note' }, note) : null));
}

export default async function overview({ params }) {
  const days = RANGES.includes(Number(params.get('days'))) ? Number(params.get('days')) : 30;
  const [counts, adoption] = await Promise.all([get('/overview'), get('/adoption' + query({ days }))]);
  const series = Array.isArray(adoption.days) ? adoption.days : [];
  const signIns = counts.signInsToday || {};

  const stats = h('dl', { class: 'stats' },
    stat(t('overview.accounts'), counts.accounts),
    stat(t('overview.with_passkey'), counts.accountsWithPasskey, t('overview.share', { percent: percent(counts.accountsWithPasskey, counts.accounts) })),
    stat(t('overview.password_only'), counts.passwordOnly, t('overview.share', { percent: percent(counts.passwordOnly, counts.accounts) })),
    stat(t('overview.no_way_in'), counts.noWayIn),
    stat(t('overview.active_sessions'), counts.activeSessions),
    stat(t('overview.webhook_backlog'), counts.webhookBacklog));

  const today = h('dl', { class: 'stats small' }, METHODS.map((method) => stat(t('method.' + method), signIns[method] ?? 0)));

  // Mail health and recovery by mail (issue 43): what waits, fails and went out; recoveries.
  const mail = counts.mail || {};
  const recovery = counts.emailRecovery || {};
  const mailStats = h('dl', { class: 'stats mail' },
    stat(t('overview.mail_queued'), mail.queued ?? 0,
      mail.oldestQueuedSeconds > 0 ? t('overview.mail_oldest', { minutes: Math.ceil(mail.oldestQueuedSeconds / 60) }) : null),
    stat(t('overview.mail_failing'), mail.failing ?? 0),
    stat(t('overview.mail_sent'), mail.sentLastDay ?? 0),
    stat(t('overview.mail_failed'), mail.failedLastDay ?? 0),
    stat(t('overview.recovery_requested'), recovery.requested ?? 0),
    stat(t('overview.recovery_completed'), recovery.completed ?? 0),
    stat(t('overview.recovery_undone'), recovery.undone ?? 0));

  // The range: links, so each range has its own address.
  const ranges = h('nav', { class: 'segmented', 'aria-label': t('overview.range') },
    h('ul', {}, RANGES.map((n) => h('li', {}, h('a', { href: `#/overview?days=${n}`, 'aria-current': n === days ? 'true' : null }, t('overview.days', { count: n }))))));

  const last = series[series.length - 1];
  const latest = (sentence) => (last ? t(sentence, { date: day(last.date, true) }) : t('chart.no_data'));
  // A number of a day: value('newPasskeys') or value('upgrades', 'button').
  const value = (...path) => (row) => path.reduce((object, key) => (object ? object[key] : undefined), row) ?? 0;

  const adoptionChart = chart({
    title: t('chart.adoption.title'),
    summary: last
      ? t('chart.adoption.summary', { date: day(last.date, true), passkey: number(last.accountsWithPasskey), password: number(last.passwordOnly), days })
      : t('chart.no_data'),
    days: series,
    kind: 'area',
    stacked: [
      { label: t('chart.series.with_passkey'), value: value('accountsWithPasskey') },
      { label: t('chart.series.password_only'), value: value('passwordOnly') },
    ],
  });
  const signInChart = chart({
    title: t('chart.sign_ins.title'),
    summary: latest('chart.sign_ins.summary'),
    days: series,
    stacked: METHODS.map((method) => ({ label: t('method.' + method), value: value('signIns', method) })),
  });
  const growthChart = chart({
    title: t('chart.growth.title'),
    summary: latest('chart.growth.summary'),
    days: series,
    stacked: [
      { label: t('chart.series.upgrade_conditional'), value: value('upgrades', 'conditional') },
      { label: t('chart.series.upgrade_button'), value: value('upgrades', 'button') },
      { label: t('chart.series.upgrade_recovery'), value: value('upgrades', 'recovery') },
    ],
    lines: [
      { label: t('chart.series.new_passkeys'), value: value('newPasskeys') },
      { label: t('chart.series.passwords_off'), value: value('passwordsOff') },
    ],
  });

  return [
    h('div', { class: 'page-head' }, h('h1', {}, t('overview.title')),
      h('p', { class: 'hint' }, t('overview.generated', { time: when(counts.generatedAt, '—') }))),
    section(t('overview.now'), stats),
    section(t('overview.sign_ins_today'), today),
    section(t('overview.mail'), mailStats),
    section(t('overview.adoption'),
      h('div', { class: 'toolbar' }, ranges,
        h('a', { class: 'button-link', href: '/admin/api/adoption.csv' + query({ days }), download: `passkeyd-adoption-${days}d.csv` }, t('overview.download_csv'))),
      adoptionChart, signInChart, growthChart),
  ];
}
