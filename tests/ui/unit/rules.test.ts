import { describe, expect, it } from 'vitest';
import { editBody, normalise, ruleDeletePath, ruleRows, ruleScope } from '../../../ui/src/rules';

describe('rules', () => {
  it('lists allow rules first, each list in the server\'s order', () => {
    expect(ruleRows({ allow: ['b.test'], deny: ['z.test', 'a.test'] })).toEqual([
      { list: 'allow', rule: 'b.test' }, { list: 'deny', rule: 'z.test' }, { list: 'deny', rule: 'a.test' },
    ]);
  });

  it('says what each form of rule matches', () => {
    expect(ruleScope('ads.example')).toBe('this name only');
    expect(ruleScope('*.example.com')).toBe('every name below example.com, not example.com itself');
    expect(ruleScope('/^ad[0-9]+\\./')).toBe('names matching the regular expression');
    expect(ruleScope('/')).toBe('this name only');
  });

  it('url-encodes the rule in the delete path (a regex may hold "/")', () => {
    expect(ruleDeletePath({ list: 'deny', rule: '/a/b/' })).toBe('/api/filter/rules/deny/%2Fa%2Fb%2F');
    expect(ruleDeletePath({ list: 'allow', rule: '*.x.test' })).toBe('/api/filter/rules/allow/*.x.test');
  });

  it('normalises names as the loader keeps them, regexes as they are', () => {
    expect(normalise(' Ads.Example. ')).toBe('ads.example');
    expect(normalise('/Ab./')).toBe('/Ab./');
  });

  it('edits with one request naming only what changed; no change, no call', () => {
    const old = { list: 'deny' as const, rule: 'a.test' };
    expect(editBody(old, { list: 'deny', rule: ' b.test ' })).toEqual({ list: 'deny', rule: 'a.test', new_rule: 'b.test' });
    expect(editBody(old, { list: 'allow', rule: 'a.test' })).toEqual({ list: 'deny', rule: 'a.test', new_list: 'allow' });
    expect(editBody(old, { list: 'allow', rule: 'c.test' })).toEqual({ list: 'deny', rule: 'a.test', new_rule: 'c.test', new_list: 'allow' });
    expect(editBody(old, { list: 'deny', rule: 'A.test.' })).toBeNull();
  });
});
